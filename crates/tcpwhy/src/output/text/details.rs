//! The detail sections (`--connection ID`, `--details`): what is kept of a connection while
//! it is open.

use super::*;

/// Which connections get a detailed section (`--connection ID`, `--details`).
#[derive(Default)]
pub enum DetailSel {
    #[default]
    None,
    /// These connection ids, everything about them.
    Ids(std::collections::BTreeSet<u64>),
    /// The `top` connections that lost the most time to findings.
    WithFindings,
}

/// What the detail section keeps of a connection while it is open.
#[derive(Default)]
pub(super) struct Pending {
    pub(super) findings: Vec<tcpwhy_detect::Finding>,
    pub(super) exchanges: Vec<tcpwhy_detect::Exchange>,
    pub(super) stalls: Vec<tcpwhy_detect::Stall>,
    /// Exchanges beyond the listed ones.
    pub(super) more_exchanges: u64,
}

/// Exchanges listed per connection in its details.
pub(super) const DETAIL_EXCHANGES: usize = 50;
/// Findings kept per connection in its details.
pub(super) const DETAIL_FINDINGS: usize = 200;

#[derive(Default)]
pub(super) struct Details {
    pub(super) sel: DetailSel,
    pub(super) pending: std::collections::HashMap<u64, Pending>,
    /// Rendered sections, keyed for order: (lost time descending, id).
    pub(super) done: std::collections::BTreeMap<(Reverse<i64>, u64), String>,
}

impl Details {
    pub(super) fn wants(&self, id: u64) -> bool {
        match &self.sel {
            DetailSel::None => false,
            DetailSel::Ids(ids) => ids.contains(&id),
            DetailSel::WithFindings => true,
        }
    }
}
