//! Scalars as kubectl reads them: YAML 1.1 resolution by go-yaml v2 (under
//! `sigs.k8s.io/yaml`), then the JSON that kubectl sends to the API server.
//!
//! A plain (unquoted, untagged) scalar is resolved by its first character, as go-yaml v2's
//! `resolve.go` does: a fixed table of words (`yes`, `Off`, `~`, `.inf`, …), then for text
//! starting with a digit or a sign a timestamp, a Go integer literal (`0120` is octal,
//! `0x1F`, `0b101`, `0o17`, `_` separators), or a float. Everything else is a string;
//! base-60 numbers (`1:30`) are strings too (go-yaml v2 does not read them). Quoted
//! scalars are strings unless a `!!int`/`!!float`/`!!bool`/`!!null` tag asks otherwise.

use std::borrow::Cow;

use serde_json::{Number, Value};

/// A scalar as go-yaml v2 resolves it.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Resolved {
    /// `~`, `null`, the empty scalar.
    Null,
    /// The YAML 1.1 booleans (`y`, `yes`, `on`, `true`, … and their negations).
    Bool(bool),
    /// A Go `int`.
    Int(i64),
    /// An integer above `i64::MAX` (Go `uint64`).
    Uint(u64),
    /// A Go `float64`, possibly infinite or NaN.
    Float(f64),
    /// A timestamp, already as the RFC 3339 text Go's JSON encoder writes.
    Timestamp(String),
    /// The text itself.
    Str,
}

/// The words go-yaml v2 looks up before anything else (`resolveMapList`).
const WORDS: &[(&str, Resolved)] = &[
    ("y", Resolved::Bool(true)),
    ("Y", Resolved::Bool(true)),
    ("yes", Resolved::Bool(true)),
    ("Yes", Resolved::Bool(true)),
    ("YES", Resolved::Bool(true)),
    ("true", Resolved::Bool(true)),
    ("True", Resolved::Bool(true)),
    ("TRUE", Resolved::Bool(true)),
    ("on", Resolved::Bool(true)),
    ("On", Resolved::Bool(true)),
    ("ON", Resolved::Bool(true)),
    ("n", Resolved::Bool(false)),
    ("N", Resolved::Bool(false)),
    ("no", Resolved::Bool(false)),
    ("No", Resolved::Bool(false)),
    ("NO", Resolved::Bool(false)),
    ("false", Resolved::Bool(false)),
    ("False", Resolved::Bool(false)),
    ("FALSE", Resolved::Bool(false)),
    ("off", Resolved::Bool(false)),
    ("Off", Resolved::Bool(false)),
    ("OFF", Resolved::Bool(false)),
    ("", Resolved::Null),
    ("~", Resolved::Null),
    ("null", Resolved::Null),
    ("Null", Resolved::Null),
    ("NULL", Resolved::Null),
    (".nan", Resolved::Float(f64::NAN)),
    (".NaN", Resolved::Float(f64::NAN)),
    (".NAN", Resolved::Float(f64::NAN)),
    (".inf", Resolved::Float(f64::INFINITY)),
    (".Inf", Resolved::Float(f64::INFINITY)),
    (".INF", Resolved::Float(f64::INFINITY)),
    ("+.inf", Resolved::Float(f64::INFINITY)),
    ("+.Inf", Resolved::Float(f64::INFINITY)),
    ("+.INF", Resolved::Float(f64::INFINITY)),
    ("-.inf", Resolved::Float(f64::NEG_INFINITY)),
    ("-.Inf", Resolved::Float(f64::NEG_INFINITY)),
    ("-.INF", Resolved::Float(f64::NEG_INFINITY)),
];

/// Resolves a plain, untagged scalar.
pub(crate) fn resolve_plain(text: &str) -> Resolved {
    let Some(&first) = text.as_bytes().first() else {
        return Resolved::Null;
    };
    // go-yaml's hint table: only these first characters can start a non-string.
    let hint = match first {
        b'+' | b'-' | b'0'..=b'9' => b'D',
        b'y' | b'Y' | b'n' | b'N' | b't' | b'T' | b'f' | b'F' | b'o' | b'O' | b'~' => b'M',
        b'.' => b'.',
        _ => return Resolved::Str,
    };
    // Every word of the table is at most five bytes long.
    if text.len() <= 5
        && let Some((_, r)) = WORDS.iter().find(|(w, _)| *w == text)
    {
        return r.clone();
    }
    match hint {
        b'.' => go_float(text).map_or(Resolved::Str, Resolved::Float),
        b'D' => number_or_timestamp(text),
        _ => Resolved::Str,
    }
}

/// Resolves a scalar carrying a core-schema tag (`!!int "0120"` is 80); an error when the
/// text is not of the tagged type (go-yaml: "cannot decode !!str `x` as a !!int").
pub(crate) fn resolve_tagged(tag: &str, text: &str) -> Result<Resolved, String> {
    let resolved = match tag {
        "str" | "binary" => return Ok(Resolved::Str),
        "int" | "float" | "bool" | "null" | "timestamp" => resolve_plain(text),
        // Other tags are not resolved: the scalar stays a string.
        _ => return Ok(Resolved::Str),
    };
    let got = match resolved {
        Resolved::Null => "null",
        Resolved::Bool(_) => "bool",
        Resolved::Int(_) | Resolved::Uint(_) => "int",
        Resolved::Float(_) => "float",
        Resolved::Timestamp(_) => "timestamp",
        Resolved::Str => "str",
    };
    match (tag, resolved) {
        ("float", Resolved::Int(i)) => Ok(Resolved::Float(i as f64)),
        ("float", Resolved::Uint(u)) => Ok(Resolved::Float(u as f64)),
        (t, r) if t == got => Ok(r),
        _ => Err(format!("cannot decode !!{got} `{text}` as a !!{tag}")),
    }
}

impl Resolved {
    /// The JSON value kubectl sends; an error for what Go's JSON encoder refuses (NaN, ±Inf).
    pub(crate) fn into_value(self, text: &str) -> Result<Value, String> {
        Ok(match self {
            Resolved::Null => Value::Null,
            Resolved::Bool(b) => Value::Bool(b),
            Resolved::Int(i) => Value::Number(i.into()),
            Resolved::Uint(u) => Value::Number(u.into()),
            Resolved::Float(f) => float_value(f).ok_or_else(|| {
                format!("{text} is not a number JSON can carry (kubectl refuses it)")
            })?,
            Resolved::Timestamp(t) => Value::String(t),
            Resolved::Str => Value::String(text.to_string()),
        })
    }

    /// The JSON object key kubectl makes of a mapping key (`sigs.k8s.io/yaml`: ints in
    /// decimal, floats as Go's `%g` of a float32, booleans as `true`/`false`); an error for
    /// the keys it refuses (null, timestamps, integers above `i64::MAX`).
    pub(crate) fn into_key(self, text: &str) -> Result<String, String> {
        match self {
            Resolved::Str => Ok(text.to_string()),
            Resolved::Bool(b) => Ok(b.to_string()),
            Resolved::Int(i) => Ok(i.to_string()),
            Resolved::Float(f) => Ok(go_g32(f)),
            Resolved::Null | Resolved::Uint(_) | Resolved::Timestamp(_) => Err(format!(
                "unsupported mapping key {text:?} (kubectl accepts only string, number and boolean keys)"
            )),
        }
    }
}

/// A float as the JSON number Go writes: integral values below 1e21 are written without
/// a fraction, so the API server reads them as integers (`port: 80.0` is port 80).
fn float_value(f: f64) -> Option<Value> {
    if !f.is_finite() {
        return None;
    }
    if f.fract() == 0.0 && f.abs() < 1e21 {
        if f >= i64::MIN as f64 && f < i64::MAX as f64 {
            return Some(Value::Number((f as i64).into()));
        }
        if f >= 0.0 && f < u64::MAX as f64 {
            return Some(Value::Number((f as u64).into()));
        }
    }
    Number::from_f64(f).map(Value::Number)
}

/// Text starting with a digit or a sign: a timestamp, an integer, a float, or a string.
fn number_or_timestamp(text: &str) -> Resolved {
    if let Some(t) = timestamp(text) {
        return Resolved::Timestamp(t);
    }
    let plain: Cow<'_, str> = if text.contains('_') {
        Cow::Owned(text.replace('_', ""))
    } else {
        Cow::Borrowed(text)
    };
    if let Some(i) = go_parse_int(&plain) {
        return Resolved::Int(i);
    }
    if let Some(u) = go_parse_uint(&plain) {
        return Resolved::Uint(u);
    }
    if is_yaml_float(&plain)
        && let Ok(f) = plain.parse::<f64>()
        && f.is_finite()
    {
        return Resolved::Float(f);
    }
    Resolved::Str
}

/// Go's `strconv.ParseInt(s, 0, 64)` (underscores already removed): a sign, then `0x`,
/// `0o`, `0b`, or a leading `0` for octal, or decimal.
fn go_parse_int(s: &str) -> Option<i64> {
    let (neg, rest) = match s.as_bytes().first()? {
        b'-' => (true, &s[1..]),
        b'+' => (false, &s[1..]),
        _ => (false, s),
    };
    let magnitude = go_parse_uint(rest)?;
    if neg {
        0i64.checked_sub_unsigned(magnitude)
    } else {
        i64::try_from(magnitude).ok()
    }
}

/// Go's `strconv.ParseUint(s, 0, 64)` (no sign).
fn go_parse_uint(s: &str) -> Option<u64> {
    let b = s.as_bytes();
    let (radix, digits) = match b {
        [b'0', b'x' | b'X', ..] => (16, &s[2..]),
        [b'0', b'o' | b'O', ..] => (8, &s[2..]),
        [b'0', b'b' | b'B', ..] => (2, &s[2..]),
        [b'0', _, ..] => (8, &s[1..]),
        _ => (10, s),
    };
    if digits.is_empty() || !digits.bytes().all(|c| (c as char).is_digit(radix)) {
        return None;
    }
    u64::from_str_radix(digits, radix).ok()
}

/// go-yaml v2's `yamlStyleFloat`: `^[-+]?(\.[0-9]+|[0-9]+(\.[0-9]*)?)([eE][-+]?[0-9]+)?$`.
fn is_yaml_float(s: &str) -> bool {
    let b = s.as_bytes();
    let mut i = usize::from(matches!(b.first(), Some(b'+' | b'-')));
    let digits = |i: &mut usize| {
        let start = *i;
        while b.get(*i).is_some_and(u8::is_ascii_digit) {
            *i += 1;
        }
        *i - start
    };
    if b.get(i) == Some(&b'.') {
        i += 1;
        if digits(&mut i) == 0 {
            return false;
        }
    } else {
        if digits(&mut i) == 0 {
            return false;
        }
        if b.get(i) == Some(&b'.') {
            i += 1;
            digits(&mut i);
        }
    }
    if matches!(b.get(i), Some(b'e' | b'E')) {
        i += 1;
        if matches!(b.get(i), Some(b'+' | b'-')) {
            i += 1;
        }
        if digits(&mut i) == 0 {
            return false;
        }
    }
    i == b.len()
}

/// Go's `strconv.ParseFloat` for text starting with `.` (`.5`, `.5e3`, `.5_5`): digits
/// with `_` only between digits; out-of-range values are not floats.
fn go_float(text: &str) -> Option<f64> {
    let b = text.as_bytes();
    for (i, c) in b.iter().enumerate() {
        if *c == b'_'
            && !(i > 0 && b[i - 1].is_ascii_digit() && b.get(i + 1).is_some_and(u8::is_ascii_digit))
        {
            return None;
        }
    }
    let plain: String = text.chars().filter(|c| *c != '_').collect();
    if !plain.starts_with('.') || !is_yaml_float(&plain) {
        return None;
    }
    plain.parse::<f64>().ok().filter(|f| f.is_finite())
}

/// Go's `strconv.FormatFloat(f, 'g', -1, 32)`, with go-yaml's spellings of infinities
/// and NaN.
fn go_g32(f: f64) -> String {
    let x = f as f32;
    if x.is_nan() {
        return ".nan".into();
    }
    if x.is_infinite() {
        return if x > 0.0 { ".inf" } else { "-.inf" }.into();
    }
    if x == 0.0 {
        return if x.is_sign_negative() { "-0" } else { "0" }.into();
    }
    // Rust's `{:e}` gives the shortest round-trip digits, as Go does.
    let sci = format!("{:e}", x.abs());
    let (mantissa, exp) = sci.split_once('e').unwrap_or((&sci, "0"));
    let exp: i32 = exp.parse().unwrap_or(0);
    let digits: String = mantissa.chars().filter(char::is_ascii_digit).collect();
    let sign = if x < 0.0 { "-" } else { "" };
    if !(-4..6).contains(&exp) {
        let (head, tail) = digits.split_at(1);
        let dot = if tail.is_empty() { "" } else { "." };
        let esign = if exp < 0 { '-' } else { '+' };
        return format!("{sign}{head}{dot}{tail}e{esign}{:02}", exp.abs());
    }
    let n = digits.len() as i32;
    if exp < 0 {
        let zeros = "0".repeat((-exp - 1) as usize);
        format!("{sign}0.{zeros}{digits}")
    } else if exp + 1 >= n {
        let zeros = "0".repeat((exp + 1 - n) as usize);
        format!("{sign}{digits}{zeros}")
    } else {
        let (int, frac) = digits.split_at((exp + 1) as usize);
        format!("{sign}{int}.{frac}")
    }
}

/// go-yaml v2's timestamps (`2006-1-2`, `2006-1-2T15:4:5.999999999Z07:00` with `T` or `t`,
/// `2006-1-2 15:4:5.999999999`), as the RFC 3339 text Go's JSON encoder writes for them.
fn timestamp(s: &str) -> Option<String> {
    let b = s.as_bytes();
    if b.len() < 5 || !b[..4].iter().all(u8::is_ascii_digit) || b[4] != b'-' {
        return None;
    }
    let mut cur = Cursor { b, i: 5 };
    let year: u32 = s[..4].parse().ok()?;
    let month = cur.num()?;
    cur.lit(b'-')?;
    let day = cur.num()?;
    if !(1..=12).contains(&month) || day < 1 || day > days_in(month, year) {
        return None;
    }
    let date = format!("{year:04}-{month:02}-{day:02}");
    if cur.done() {
        return Some(format!("{date}T00:00:00Z"));
    }
    let sep = *b.get(cur.i)?;
    if !matches!(sep, b'T' | b't' | b' ') {
        return None;
    }
    cur.i += 1;
    let hour = cur.num()?;
    cur.lit(b':')?;
    let minute = cur.num()?;
    cur.lit(b':')?;
    let second = cur.num()?;
    if hour >= 24 || minute >= 60 || second >= 60 {
        return None;
    }
    let mut frac = String::new();
    if matches!(b.get(cur.i), Some(b'.' | b',')) && b.get(cur.i + 1).is_some_and(u8::is_ascii_digit)
    {
        cur.i += 1;
        while let Some(d) = b.get(cur.i).filter(|d| d.is_ascii_digit()) {
            if frac.len() < 9 {
                frac.push(*d as char);
            }
            cur.i += 1;
        }
    }
    let frac = frac.trim_end_matches('0');
    let frac = if frac.is_empty() {
        String::new()
    } else {
        format!(".{frac}")
    };
    let zone = if sep == b' ' || cur.lit(b'Z').is_some() {
        "Z".to_string()
    } else {
        let z = s.get(cur.i..cur.i + 6)?.as_bytes();
        let sign = z[0];
        let ok = matches!(sign, b'+' | b'-')
            && z[1..3].iter().all(u8::is_ascii_digit)
            && z[3] == b':'
            && z[4..6].iter().all(u8::is_ascii_digit);
        if !ok {
            return None;
        }
        cur.i += 6;
        let (hh, mm): (u32, u32) = (
            s[cur.i - 5..cur.i - 3].parse().ok()?,
            s[cur.i - 2..cur.i].parse().ok()?,
        );
        if hh > 24 || mm > 60 {
            return None;
        }
        if hh == 0 && mm == 0 {
            "Z".to_string()
        } else {
            format!("{}{hh:02}:{mm:02}", sign as char)
        }
    };
    cur.done()
        .then(|| format!("{date}T{hour:02}:{minute:02}:{second:02}{frac}{zone}"))
}

/// A position in a timestamp.
struct Cursor<'a> {
    b: &'a [u8],
    i: usize,
}

impl Cursor<'_> {
    /// One or two digits (Go's `getnum` with `fixed == false`).
    fn num(&mut self) -> Option<u32> {
        let d = |i: usize| {
            self.b
                .get(i)
                .filter(|c| c.is_ascii_digit())
                .map(|c| u32::from(c - b'0'))
        };
        let first = d(self.i)?;
        match d(self.i + 1) {
            Some(second) => {
                self.i += 2;
                Some(first * 10 + second)
            }
            None => {
                self.i += 1;
                Some(first)
            }
        }
    }

    fn lit(&mut self, c: u8) -> Option<()> {
        (self.b.get(self.i) == Some(&c)).then(|| self.i += 1)
    }

    fn done(&self) -> bool {
        self.i == self.b.len()
    }
}

fn days_in(month: u32, year: u32) -> u32 {
    match month {
        2 if year.is_multiple_of(4) && (!year.is_multiple_of(100) || year.is_multiple_of(400)) => {
            29
        }
        2 => 28,
        4 | 6 | 9 | 11 => 30,
        _ => 31,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// What kubectl sends for a plain scalar, or `None` where it refuses the document.
    fn sent(text: &str) -> Option<Value> {
        resolve_plain(text).into_value(text).ok()
    }

    /// The rows of go-yaml v2's resolver (`resolve.go`, branch v2, and its
    /// `decode_test.go` cases), as the JSON kubectl sends.
    #[test]
    fn go_yaml_v2_resolver_table() {
        let rows: &[(&str, Option<Value>)] = &[
            // resolveMapList: booleans
            ("y", Some(json!(true))),
            ("Y", Some(json!(true))),
            ("yes", Some(json!(true))),
            ("Yes", Some(json!(true))),
            ("YES", Some(json!(true))),
            ("true", Some(json!(true))),
            ("True", Some(json!(true))),
            ("TRUE", Some(json!(true))),
            ("on", Some(json!(true))),
            ("On", Some(json!(true))),
            ("ON", Some(json!(true))),
            ("n", Some(json!(false))),
            ("N", Some(json!(false))),
            ("no", Some(json!(false))),
            ("No", Some(json!(false))),
            ("NO", Some(json!(false))),
            ("false", Some(json!(false))),
            ("False", Some(json!(false))),
            ("FALSE", Some(json!(false))),
            ("off", Some(json!(false))),
            ("Off", Some(json!(false))),
            ("OFF", Some(json!(false))),
            // spellings outside the table stay strings
            ("yEs", Some(json!("yEs"))),
            ("oN", Some(json!("oN"))),
            ("tRUE", Some(json!("tRUE"))),
            ("o", Some(json!("o"))),
            // null
            ("", Some(json!(null))),
            ("~", Some(json!(null))),
            ("null", Some(json!(null))),
            ("Null", Some(json!(null))),
            ("NULL", Some(json!(null))),
            ("nULL", Some(json!("nULL"))),
            // .inf / .nan resolve to floats that JSON cannot carry: kubectl refuses
            (".nan", None),
            (".NaN", None),
            (".NAN", None),
            (".inf", None),
            (".Inf", None),
            (".INF", None),
            ("+.inf", None),
            ("-.inf", None),
            ("-.Inf", None),
            (".iNf", Some(json!(".iNf"))),
            // integers: Go literals with base prefixes, YAML 1.1 octal, `_` separators
            ("0", Some(json!(0))),
            ("80", Some(json!(80))),
            ("-3", Some(json!(-3))),
            ("+685_230", Some(json!(685_230))),
            ("1_000", Some(json!(1000))),
            ("010", Some(json!(8))),
            ("0120", Some(json!(80))),
            ("-010", Some(json!(-8))),
            ("02472256", Some(json!(685_230))),
            ("0o17", Some(json!(15))),
            ("0x1F", Some(json!(31))),
            ("0x_0A_74_AE", Some(json!(685_230))),
            ("-0x1F", Some(json!(-31))),
            ("0b101", Some(json!(5))),
            ("0b1010_0111_0100_1010_1110", Some(json!(685_230))),
            ("-0b101", Some(json!(-5))),
            ("+0b101", Some(json!(5))),
            ("9223372036854775807", Some(json!(i64::MAX))),
            ("-9223372036854775808", Some(json!(i64::MIN))),
            (
                "9223372036854775808",
                Some(json!(9_223_372_036_854_775_808u64)),
            ),
            ("18446744073709551615", Some(json!(u64::MAX))),
            // a leading 0 that is not octal falls through to a float, written as 8 and 9
            ("08", Some(json!(8))),
            ("09", Some(json!(9))),
            // floats (integral ones reach the API server without a fraction)
            ("1.5", Some(json!(1.5))),
            ("-1.5", Some(json!(-1.5))),
            ("6.8523015e+5", Some(json!(685_230.15))),
            ("685.230_15e+03", Some(json!(685_230.15))),
            ("685_230.15", Some(json!(685_230.15))),
            ("80.0", Some(json!(80))),
            ("1e3", Some(json!(1000))),
            ("1.", Some(json!(1))),
            (".5", Some(json!(0.5))),
            ("-.5", Some(json!(-0.5))),
            (".5_5", Some(json!(0.55))),
            ("1e400", Some(json!("1e400"))),
            ("1.5.5", Some(json!("1.5.5"))),
            // base 60 is not read by go-yaml v2
            ("190:20:30", Some(json!("190:20:30"))),
            ("1:30", Some(json!("1:30"))),
            // strings that look almost like numbers
            ("0x", Some(json!("0x"))),
            ("0b2", Some(json!("0b2"))),
            ("_1", Some(json!("_1"))),
            ("-", Some(json!("-"))),
            ("1-2", Some(json!("1-2"))),
            ("10.0.0.0/8", Some(json!("10.0.0.0/8"))),
            ("10.1.2.3", Some(json!("10.1.2.3"))),
            ("::1", Some(json!("::1"))),
            ("80/TCP", Some(json!("80/TCP"))),
            ("0xG", Some(json!("0xG"))),
            ("<<", Some(json!("<<"))),
            // timestamps, as RFC 3339 text
            ("2001-12-14", Some(json!("2001-12-14T00:00:00Z"))),
            ("2001-1-2", Some(json!("2001-01-02T00:00:00Z"))),
            (
                "2001-12-14t21:59:43.10-05:00",
                Some(json!("2001-12-14T21:59:43.1-05:00")),
            ),
            (
                "2001-12-14T21:59:43.10Z",
                Some(json!("2001-12-14T21:59:43.1Z")),
            ),
            (
                "2001-12-14 21:59:43.10",
                Some(json!("2001-12-14T21:59:43.1Z")),
            ),
            (
                "2001-12-14T21:59:43+00:00",
                Some(json!("2001-12-14T21:59:43Z")),
            ),
            (
                "2001-12-14 21:59:43.10 -5",
                Some(json!("2001-12-14 21:59:43.10 -5")),
            ),
            ("2001-02-30", Some(json!("2001-02-30"))),
            ("2001-13-01", Some(json!("2001-13-01"))),
        ];
        for (text, want) in rows {
            assert_eq!(&sent(text), want, "plain scalar {text:?}");
        }
    }

    #[test]
    fn tagged_scalars() {
        let rows: &[(&str, &str, Result<Resolved, ()>)] = &[
            ("int", "0120", Ok(Resolved::Int(80))),
            ("int", "0x10", Ok(Resolved::Int(16))),
            ("float", "1", Ok(Resolved::Float(1.0))),
            ("bool", "yes", Ok(Resolved::Bool(true))),
            ("null", "~", Ok(Resolved::Null)),
            ("str", "010", Ok(Resolved::Str)),
            ("int", "abc", Err(())),
            ("bool", "1", Err(())),
            ("custom", "1", Ok(Resolved::Str)),
        ];
        for (tag, text, want) in rows {
            assert_eq!(
                &resolve_tagged(tag, text).map_err(|_| ()),
                want,
                "!!{tag} {text:?}"
            );
        }
    }

    #[test]
    fn keys_as_sigs_k8s_io_yaml_makes_them() {
        let rows: &[(&str, Option<&str>)] = &[
            ("app", Some("app")),
            ("yes", Some("true")),
            ("off", Some("false")),
            ("010", Some("8")),
            ("0x1F", Some("31")),
            ("1.5", Some("1.5")),
            ("1.0", Some("1")),
            ("0.1", Some("0.1")),
            ("1e6", Some("1e+06")),
            ("123456", Some("123456")),
            ("1234567.0", Some("1.234567e+06")),
            ("0.00001", Some("1e-05")),
            (".inf", Some(".inf")),
            ("-.inf", Some("-.inf")),
            ("~", None),
            ("", None),
            ("2001-12-14", None),
            ("9223372036854775808", None),
        ];
        for (text, want) in rows {
            assert_eq!(
                resolve_plain(text).into_key(text).ok().as_deref(),
                *want,
                "key {text:?}"
            );
        }
    }
}
