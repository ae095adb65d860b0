//! Tracepoint format files (`/sys/kernel/tracing/events/CATEGORY/NAME/format`): the offset
//! and size of each field, to check the layouts the BPF programs read against the running
//! kernel, and the number -> name tables of `__print_symbolic`, to name a reset reason the
//! way this kernel numbers it (the numbers change between kernels; the names do not).

use std::collections::BTreeMap;

/// One field of a tracepoint record.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Field {
    pub offset: usize,
    pub size: usize,
}

/// `field:TYPE NAME; offset:N; size:M; signed:S;` lines -> NAME -> (N, M). An array's name
/// loses its `[..]`.
pub fn fields(text: &str) -> BTreeMap<String, Field> {
    let mut out = BTreeMap::new();
    for line in text.lines() {
        let mut decl = None;
        let mut offset = None;
        let mut size = None;
        for part in line.trim().split(';') {
            let part = part.trim();
            if let Some(d) = part.strip_prefix("field:") {
                decl = Some(d);
            } else if let Some(n) = part.strip_prefix("offset:") {
                offset = n.trim().parse().ok();
            } else if let Some(n) = part.strip_prefix("size:") {
                size = n.trim().parse().ok();
            }
        }
        let (Some(decl), Some(offset), Some(size)) = (decl, offset, size) else {
            continue;
        };
        let Some(name) = decl.split_whitespace().last() else {
            continue;
        };
        let name = name
            .split('[')
            .next()
            .unwrap_or(name)
            .trim_start_matches('*');
        out.insert(name.to_string(), Field { offset, size });
    }
    out
}

/// The `{ N, "NAME" }` pairs of `__print_symbolic(REC->FIELD, ...)` in the `print fmt` line.
pub fn symbols(text: &str, field: &str) -> BTreeMap<u32, String> {
    let mut out = BTreeMap::new();
    let key = format!("__print_symbolic(REC->{field},");
    let Some(start) = text.find(&key) else {
        return out;
    };
    let mut rest = &text[start + key.len()..];
    // Pairs until the call's closing parenthesis.
    while let Some(open) = rest.find(['{', ')']) {
        if rest.as_bytes()[open] == b')' {
            break;
        }
        let Some(close) = rest[open..].find('}') else {
            break;
        };
        let pair = &rest[open + 1..open + close];
        if let Some((n, name)) = pair.split_once(',') {
            if let Ok(n) = n.trim().parse::<u32>() {
                out.insert(n, name.trim().trim_matches('"').to_string());
            }
        }
        rest = &rest[open + close + 1..];
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    // tcp:tcp_send_reset's format on this machine's kernel (6.18), the reason list shortened.
    const SEND_RESET: &str = "name: tcp_send_reset
ID: 1726
format:
\tfield:unsigned short common_type;\toffset:0;\tsize:2;\tsigned:0;
\tfield:unsigned char common_flags;\toffset:2;\tsize:1;\tsigned:0;
\tfield:unsigned char common_preempt_count;\toffset:3;\tsize:1;\tsigned:0;
\tfield:int common_pid;\toffset:4;\tsize:4;\tsigned:1;

\tfield:const void * skbaddr;\toffset:8;\tsize:8;\tsigned:0;
\tfield:const void * skaddr;\toffset:16;\tsize:8;\tsigned:0;
\tfield:int state;\toffset:24;\tsize:4;\tsigned:1;
\tfield:enum sk_rst_reason reason;\toffset:28;\tsize:4;\tsigned:0;
\tfield:__u8 saddr[28];\toffset:32;\tsize:28;\tsigned:0;
\tfield:__u8 daddr[28];\toffset:60;\tsize:28;\tsigned:0;

print fmt: \"skbaddr=%p skaddr=%p src=%pISpc dest=%pISpc state=%s reason=%s\", REC->skbaddr, REC->skaddr, REC->saddr, REC->daddr, REC->state ? __print_symbolic(REC->state, { TCP_ESTABLISHED, \"TCP_ESTABLISHED\" }) : \"UNKNOWN\", __print_symbolic(REC->reason, { 0, \"NOT_SPECIFIED\" }, { 1, \"NO_SOCKET\" }, { 2, \"TCP_INVALID_ACK_SEQUENCE\" }, { 9, \"TCP_TIMEWAIT_SOCKET\" }, { 24, \"ERROR\" })
";

    #[test]
    fn fields_and_their_offsets() {
        let f = fields(SEND_RESET);
        assert_eq!(
            f["skaddr"],
            Field {
                offset: 16,
                size: 8
            }
        );
        assert_eq!(
            f["state"],
            Field {
                offset: 24,
                size: 4
            }
        );
        assert_eq!(
            f["reason"],
            Field {
                offset: 28,
                size: 4
            }
        );
        assert_eq!(
            f["saddr"],
            Field {
                offset: 32,
                size: 28
            }
        );
        assert_eq!(f["common_pid"], Field { offset: 4, size: 4 });
        assert!(fields("field:int x; offset:zz; size:4;\ngarbage\n").is_empty());
    }

    #[test]
    fn reset_reasons_by_number() {
        let r = symbols(SEND_RESET, "reason");
        assert_eq!(r[&2], "TCP_INVALID_ACK_SEQUENCE");
        assert_eq!(r[&9], "TCP_TIMEWAIT_SOCKET");
        assert_eq!(r.len(), 5);
        // The state table uses names, not numbers: nothing is made up from it.
        assert!(symbols(SEND_RESET, "state").is_empty());
        assert!(symbols(SEND_RESET, "nosuch").is_empty());
        assert!(symbols("__print_symbolic(REC->reason, { 1, \"A\"", "reason").is_empty());
    }
}
