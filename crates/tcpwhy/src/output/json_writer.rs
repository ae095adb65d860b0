//! The compact JSON of a record view (`record.rs`), byte for byte what `serde_json::to_writer`
//! writes, with one difference in how: a struct field's key is copied as it is, not scanned for
//! characters to escape (keys are the views' own `&'static str` identifiers). That scan was
//! the largest part of writing a connection record (about a hundred keys each). Numbers go
//! through `serde_json`'s own formatter and strings through `serde_json` itself, so every
//! value is spelled as `serde_json` spells it; tests check the bytes against it on every
//! fixture.

use serde::ser::{self, Serialize};
use serde_json::ser::{CompactFormatter, Formatter};

/// Writes `v` as compact JSON at the end of `out`.
pub fn write(out: &mut Vec<u8>, v: &impl Serialize) {
    // Writing into memory cannot fail, and the views have no map with a non-string key.
    let _ = v.serialize(&mut Writer { out });
}

struct Writer<'a> {
    out: &'a mut Vec<u8>,
}

/// What cannot happen writing the views (kept for serde's signatures).
#[derive(Debug)]
pub struct Error(String);

impl std::fmt::Display for Error {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for Error {}

impl ser::Error for Error {
    fn custom<T: std::fmt::Display>(msg: T) -> Error {
        Error(msg.to_string())
    }
}

/// A number through `serde_json`'s formatter (itoa, zmij), as `serde_json` writes it.
macro_rules! number {
    ($($f:ident($t:ty) => $w:ident),* $(,)?) => {
        $(fn $f(self, v: $t) -> Result<(), Error> {
            let _ = CompactFormatter.$w(self.out, v);
            Ok(())
        })*
    };
}

impl<'a, 'b> ser::Serializer for &'b mut Writer<'a> {
    type Ok = ();
    type Error = Error;
    type SerializeSeq = Compound<'a, 'b>;
    type SerializeTuple = Compound<'a, 'b>;
    type SerializeTupleStruct = Compound<'a, 'b>;
    type SerializeTupleVariant = ser::Impossible<(), Error>;
    type SerializeMap = Compound<'a, 'b>;
    type SerializeStruct = Compound<'a, 'b>;
    type SerializeStructVariant = ser::Impossible<(), Error>;

    number!(
        serialize_i8(i8) => write_i8,
        serialize_i16(i16) => write_i16,
        serialize_i32(i32) => write_i32,
        serialize_i64(i64) => write_i64,
        serialize_u8(u8) => write_u8,
        serialize_u16(u16) => write_u16,
        serialize_u32(u32) => write_u32,
        serialize_u64(u64) => write_u64,
    );

    fn serialize_f32(self, v: f32) -> Result<(), Error> {
        self.serialize_f64(f64::from(v))
    }
    /// As `serde_json`: a number that is not finite is null.
    fn serialize_f64(self, v: f64) -> Result<(), Error> {
        if v.is_finite() {
            let _ = CompactFormatter.write_f64(self.out, v);
        } else {
            self.out.extend_from_slice(b"null");
        }
        Ok(())
    }
    fn serialize_bool(self, v: bool) -> Result<(), Error> {
        self.out
            .extend_from_slice(if v { b"true" as &[u8] } else { b"false" });
        Ok(())
    }
    fn serialize_char(self, v: char) -> Result<(), Error> {
        self.serialize_str(v.encode_utf8(&mut [0; 4]))
    }
    /// Copied between quotes when nothing in it needs escaping (control characters, `"` and
    /// `\\` are what `serde_json` escapes), else escaped by `serde_json` itself.
    fn serialize_str(self, v: &str) -> Result<(), Error> {
        if v.bytes().all(|b| b >= 0x20 && b != b'"' && b != b'\\') {
            self.out.push(b'"');
            self.out.extend_from_slice(v.as_bytes());
            self.out.push(b'"');
            return Ok(());
        }
        serde_json::to_writer(&mut *self.out, v).map_err(ser::Error::custom)
    }
    fn serialize_bytes(self, v: &[u8]) -> Result<(), Error> {
        serde_json::to_writer(&mut *self.out, v).map_err(ser::Error::custom)
    }
    fn serialize_none(self) -> Result<(), Error> {
        self.serialize_unit()
    }
    fn serialize_some<T: ?Sized + Serialize>(self, v: &T) -> Result<(), Error> {
        v.serialize(self)
    }
    fn serialize_unit(self) -> Result<(), Error> {
        self.out.extend_from_slice(b"null");
        Ok(())
    }
    fn serialize_unit_struct(self, _n: &'static str) -> Result<(), Error> {
        self.serialize_unit()
    }
    fn serialize_unit_variant(
        self,
        _n: &'static str,
        _i: u32,
        variant: &'static str,
    ) -> Result<(), Error> {
        self.serialize_str(variant)
    }
    fn serialize_newtype_struct<T: ?Sized + Serialize>(
        self,
        _n: &'static str,
        v: &T,
    ) -> Result<(), Error> {
        v.serialize(self)
    }
    fn serialize_newtype_variant<T: ?Sized + Serialize>(
        self,
        _n: &'static str,
        _i: u32,
        variant: &'static str,
        v: &T,
    ) -> Result<(), Error> {
        self.out.push(b'{');
        self.serialize_str(variant)?;
        self.out.push(b':');
        v.serialize(&mut *self)?;
        self.out.push(b'}');
        Ok(())
    }
    fn serialize_seq(self, _l: Option<usize>) -> Result<Compound<'a, 'b>, Error> {
        self.out.push(b'[');
        Ok(Compound {
            w: self,
            first: true,
            close: b']',
        })
    }
    fn serialize_tuple(self, l: usize) -> Result<Compound<'a, 'b>, Error> {
        self.serialize_seq(Some(l))
    }
    fn serialize_tuple_struct(self, _n: &'static str, l: usize) -> Result<Compound<'a, 'b>, Error> {
        self.serialize_seq(Some(l))
    }
    fn serialize_tuple_variant(
        self,
        _n: &'static str,
        _i: u32,
        _v: &'static str,
        _l: usize,
    ) -> Result<Self::SerializeTupleVariant, Error> {
        Err(ser::Error::custom("no tuple variant in a record"))
    }
    fn serialize_map(self, _l: Option<usize>) -> Result<Compound<'a, 'b>, Error> {
        self.out.push(b'{');
        Ok(Compound {
            w: self,
            first: true,
            close: b'}',
        })
    }
    fn serialize_struct(self, _n: &'static str, _l: usize) -> Result<Compound<'a, 'b>, Error> {
        self.serialize_map(None)
    }
    fn serialize_struct_variant(
        self,
        _n: &'static str,
        _i: u32,
        _v: &'static str,
        _l: usize,
    ) -> Result<Self::SerializeStructVariant, Error> {
        Err(ser::Error::custom("no struct variant in a record"))
    }
}

/// An array or object being written: a comma before each element but the first.
pub struct Compound<'a, 'b> {
    w: &'b mut Writer<'a>,
    first: bool,
    close: u8,
}

impl Compound<'_, '_> {
    fn comma(&mut self) {
        if !self.first {
            self.w.out.push(b',');
        }
        self.first = false;
    }
    fn end(self) -> Result<(), Error> {
        self.w.out.push(self.close);
        Ok(())
    }
}

impl ser::SerializeSeq for Compound<'_, '_> {
    type Ok = ();
    type Error = Error;
    fn serialize_element<T: ?Sized + Serialize>(&mut self, v: &T) -> Result<(), Error> {
        self.comma();
        v.serialize(&mut *self.w)
    }
    fn end(self) -> Result<(), Error> {
        Compound::end(self)
    }
}

impl ser::SerializeTuple for Compound<'_, '_> {
    type Ok = ();
    type Error = Error;
    fn serialize_element<T: ?Sized + Serialize>(&mut self, v: &T) -> Result<(), Error> {
        ser::SerializeSeq::serialize_element(self, v)
    }
    fn end(self) -> Result<(), Error> {
        Compound::end(self)
    }
}

impl ser::SerializeTupleStruct for Compound<'_, '_> {
    type Ok = ();
    type Error = Error;
    fn serialize_field<T: ?Sized + Serialize>(&mut self, v: &T) -> Result<(), Error> {
        ser::SerializeSeq::serialize_element(self, v)
    }
    fn end(self) -> Result<(), Error> {
        Compound::end(self)
    }
}

/// A map's keys are data (a finding's details): written as strings, escaped.
impl ser::SerializeMap for Compound<'_, '_> {
    type Ok = ();
    type Error = Error;
    fn serialize_key<T: ?Sized + Serialize>(&mut self, k: &T) -> Result<(), Error> {
        self.comma();
        // As serde_json: only string keys (every map of a record has them).
        serde_json::to_writer(&mut *self.w.out, k).map_err(ser::Error::custom)
    }
    fn serialize_value<T: ?Sized + Serialize>(&mut self, v: &T) -> Result<(), Error> {
        self.w.out.push(b':');
        v.serialize(&mut *self.w)
    }
    fn end(self) -> Result<(), Error> {
        Compound::end(self)
    }
}

/// A struct's keys are the views' identifiers: copied as they are.
impl ser::SerializeStruct for Compound<'_, '_> {
    type Ok = ();
    type Error = Error;
    #[inline]
    fn serialize_field<T: ?Sized + Serialize>(
        &mut self,
        key: &'static str,
        v: &T,
    ) -> Result<(), Error> {
        debug_assert!(key.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_'));
        self.comma();
        let out = &mut *self.w.out;
        out.push(b'"');
        out.extend_from_slice(key.as_bytes());
        out.extend_from_slice(b"\":");
        v.serialize(&mut *self.w)
    }
    fn end(self) -> Result<(), Error> {
        Compound::end(self)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// Values of every kind the views write, and `Value`s (a finding's details), give the
    /// bytes `serde_json` gives.
    #[test]
    fn the_bytes_of_serde_json() {
        let v = json!({
            "a": [1, -2, 3.25, 1e300, 0.1, null, true, false, "\u{7f}", "plain", ""],
            "quote \" and \\ and \n": "tab\tand \u{1} and é",
            "nested": {"x": [], "y": {}, "z": [[1], {"k": "v"}]},
            "big": u64::MAX, "small": i64::MIN,
        });
        let mut b = Vec::new();
        write(&mut b, &v);
        assert_eq!(
            String::from_utf8(b).unwrap(),
            serde_json::to_string(&v).unwrap()
        );
        for x in [f64::NAN, f64::INFINITY, -0.0, 5e-324, 123456.789] {
            let mut b = Vec::new();
            write(&mut b, &x);
            assert_eq!(
                String::from_utf8(b).unwrap(),
                serde_json::to_string(&x).unwrap()
            );
        }
        let t = (Some(1u8), None::<u32>, 'c', [1u16, 2], "s");
        let mut b = Vec::new();
        write(&mut b, &t);
        assert_eq!(
            String::from_utf8(b).unwrap(),
            serde_json::to_string(&t).unwrap()
        );
    }
}

#[cfg(test)]
mod records {
    use crate::output::record::{ConnectionRecord, ExchangeRecord, FindingRecord, StallRecord};
    use tcpwhy_detect::{Detectors, Exchange, Finding, Output, Stall};
    use tcpwhy_track::{Analyzer, Connection};

    #[derive(Default)]
    struct Keep {
        conns: Vec<Connection>,
        exchanges: Vec<Exchange>,
        findings: Vec<Finding>,
        stalls: Vec<Stall>,
    }

    impl Output for Keep {
        fn finding(&mut self, f: &Finding) {
            self.findings.push(f.clone());
        }
        fn connection(&mut self, c: &Connection) {
            self.conns.push(c.clone());
        }
        fn exchange(&mut self, x: &Exchange) {
            self.exchanges.push(x.clone());
        }
        fn stall(&mut self, s: &Stall) {
            self.stalls.push(s.clone());
        }
    }

    fn same(v: &impl serde::Serialize, path: &str) {
        let mut b = Vec::new();
        super::write(&mut b, v);
        let want = serde_json::to_string(v).unwrap();
        assert_eq!(String::from_utf8(b).unwrap(), want, "{path}");
    }

    /// Every record of every fixture: the bytes `serde_json` writes for the same view.
    #[test]
    fn every_record_of_every_fixture_as_serde_json_writes_it() {
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fixtures");
        let mut n = [0usize; 4];
        for dir in ["captures", "lab"] {
            for e in std::fs::read_dir(root.join(dir)).unwrap().flatten() {
                let path = e.path().to_string_lossy().to_string();
                let Ok(mut cap) = tcpwhy_capture::Capture::open(&[&path]) else {
                    continue;
                };
                let mut keep = Keep::default();
                let mut a = Analyzer::new(Default::default());
                {
                    let mut det = Detectors::new(&[], &mut keep);
                    while let Ok(Some(p)) = cap.next() {
                        a.frame(p.frame, p.ts_ns, p.link, p.data, p.orig_len, &mut det);
                    }
                    a.finish(&mut det);
                }
                keep.conns
                    .iter()
                    .for_each(|c| same(&ConnectionRecord(c), &path));
                keep.exchanges
                    .iter()
                    .for_each(|x| same(&ExchangeRecord(x), &path));
                keep.findings
                    .iter()
                    .for_each(|f| same(&FindingRecord(f), &path));
                keep.stalls
                    .iter()
                    .for_each(|s| same(&StallRecord(s), &path));
                n[0] += keep.conns.len();
                n[1] += keep.exchanges.len();
                n[2] += keep.findings.len();
                n[3] += keep.stalls.len();
            }
        }
        // (134 connections, 160 exchanges, 45 findings, 50 stalls when written.)
        assert!(n[0] > 100 && n[1] > 100 && n[2] > 20 && n[3] > 20, "{n:?}");
    }
}
