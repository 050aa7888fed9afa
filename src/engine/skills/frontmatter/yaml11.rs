//! Front matter read the way the reference reads it: PyYAML's `SafeLoader`
//! (YAML 1.1 implicit types) building Python values, of which the
//! reference keeps `str(value)` (docs/contract.md §4.1; agentscope
//! `workspace/_local_workspace.py`, `_validate_skill`).
//!
//! `yaml-rust2` gives the events (with each scalar's style, so `yes` and
//! `"yes"` differ); this module resolves plain scalars with PyYAML's
//! resolver table, builds a [`Py`] tree (mappings keep every pair, so
//! duplicate keys resolve as Python's `dict` does: the last one counts) and
//! renders `str()` and `repr()` as CPython does.
//!
//! Limits: the tags `!!binary`, `!!set`, `!!omap`, `!!pairs` and
//! application tags are refused (the reference accepts the first four);
//! integers beyond `i128` keep their decimal digits only for plain decimal
//! text; timestamps with a time of day render as `datetime.__str__` does
//! for the forms PyYAML reads.

use std::collections::HashMap;
use std::sync::LazyLock;

use regex::Regex;
use yaml_rust2::parser::{Event, MarkedEventReceiver, Parser, Tag};
use yaml_rust2::scanner::{Marker, TScalarStyle};

/// A Python value as PyYAML's `SafeLoader` constructs it.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Py {
    /// `None` (`~`, `null`, an empty value).
    None,
    /// `bool` (`yes`, `off`, `true`, ...).
    Bool(bool),
    /// `int` (`017` is octal 15, `0x1F`, `1_000`, `190:20:30`).
    Int(i128),
    /// An `int` too large for `i128`: its decimal digits.
    BigInt(String),
    /// `float` (`1.5`, `.inf`, `.NaN`; `1e3` without a dot is a string).
    Float(f64),
    /// `str`.
    Str(String),
    /// `datetime.date` or `datetime.datetime`: (`str()` form, `repr()` form).
    Time(String, String),
    /// `list`.
    Seq(Vec<Py>),
    /// `dict`, pairs in order; a repeated key keeps its first place and
    /// its last value.
    Map(Vec<(Py, Py)>),
}

impl Py {
    /// Python's truth value: `not value` is how the reference tests a
    /// required field.
    pub fn truthy(&self) -> bool {
        match self {
            Py::None => false,
            Py::Bool(b) => *b,
            Py::Int(i) => *i != 0,
            Py::BigInt(_) | Py::Time(..) => true,
            Py::Float(f) => *f != 0.0,
            Py::Str(s) => !s.is_empty(),
            Py::Seq(v) => !v.is_empty(),
            Py::Map(m) => !m.is_empty(),
        }
    }

    /// What the value is, for messages (`a boolean`, `a list`, ...).
    pub fn kind(&self) -> &'static str {
        match self {
            Py::None => "null",
            Py::Bool(_) => "a boolean",
            Py::Int(_) | Py::BigInt(_) => "an integer",
            Py::Float(_) => "a float",
            Py::Str(_) => "text",
            Py::Time(..) => "a date",
            Py::Seq(_) => "a list",
            Py::Map(_) => "a mapping",
        }
    }

    /// `str(value)` as CPython prints it.
    pub fn py_str(&self) -> String {
        match self {
            Py::Str(s) => s.clone(),
            Py::Time(s, _) => s.clone(),
            other => other.py_repr(),
        }
    }

    /// `repr(value)` as CPython prints it.
    pub fn py_repr(&self) -> String {
        match self {
            Py::None => "None".into(),
            Py::Bool(true) => "True".into(),
            Py::Bool(false) => "False".into(),
            Py::Int(i) => i.to_string(),
            Py::BigInt(s) => s.clone(),
            Py::Float(f) => float_repr(*f),
            Py::Str(s) => str_repr(s),
            Py::Time(_, r) => r.clone(),
            Py::Seq(v) => {
                let items: Vec<String> = v.iter().map(Py::py_repr).collect();
                format!("[{}]", items.join(", "))
            }
            Py::Map(m) => {
                let items: Vec<String> = m
                    .iter()
                    .map(|(k, v)| format!("{}: {}", k.py_repr(), v.py_repr()))
                    .collect();
                format!("{{{}}}", items.join(", "))
            }
        }
    }
}

/// One top-level key of the front matter as read: its value and the
/// 1-based lines (in the YAML text) of every occurrence of the key.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Field {
    /// The value Python ends up with (the last occurrence).
    pub value: Py,
    /// The value's scalar text as written, when it is a scalar.
    pub raw: Option<String>,
    /// 1-based YAML lines of each occurrence, in order.
    pub lines: Vec<usize>,
}

/// The top-level string keys of a front matter, by key.
pub(crate) type Fields = HashMap<String, Field>;

/// The YAML text read as PyYAML would: `Ok(None)` when the document is
/// not a mapping (the reference then has no metadata at all), else the
/// top-level string keys with their values.
///
/// Errors: the parser's message and a 1-based YAML line, for YAML the
/// parser rejects, a tag `SafeLoader` cannot construct, an unhashable key
/// or more than one document.
pub(crate) fn load(yaml: &str) -> Result<Option<Fields>, (String, Option<usize>)> {
    let mut b = Builder::default();
    let mut parser = Parser::new_from_str(yaml);
    parser
        .load(&mut b, true)
        .map_err(|e| (e.to_string(), Some(e.marker().line())))?;
    if let Some(e) = b.error {
        return Err(e);
    }
    if b.docs.len() > 1 {
        return Err((
            "expected a single document in the stream, but found another document".into(),
            None,
        ));
    }
    let pairs = match b.docs.into_iter().next() {
        // An empty front matter: no keys (the reference: no metadata).
        None | Some(Py::None) => Vec::new(),
        Some(Py::Map(pairs)) => pairs,
        Some(_) => return Ok(None),
    };
    let mut out = HashMap::new();
    for (k, value) in pairs {
        let Py::Str(k) = k else { continue };
        let raw = b.top_raw.remove(&k).flatten();
        let lines = b.top_lines.remove(&k).unwrap_or_default();
        out.insert(k, Field { value, raw, lines });
    }
    Ok(Some(out))
}

#[derive(Default)]
struct Builder {
    /// Open collections: a sequence or a mapping (with a pending key).
    stack: Vec<Frame>,
    anchors: HashMap<usize, Py>,
    docs: Vec<Py>,
    /// Lines of each top-level key (document 0 only).
    top_lines: HashMap<String, Vec<usize>>,
    /// Plain text of each top-level key's last value, when a plain scalar.
    top_raw: HashMap<String, Option<String>>,
    error: Option<(String, Option<usize>)>,
}

enum Frame {
    Seq(Vec<Py>, usize),
    Map {
        pairs: Vec<(Py, Py)>,
        key: Option<Py>,
        anchor: usize,
    },
}

impl Builder {
    fn fail(&mut self, msg: String, line: usize) {
        if self.error.is_none() {
            self.error = Some((msg, Some(line)));
        }
    }

    /// Puts a finished value into the open collection, or ends a document.
    fn push(&mut self, v: Py, raw: Option<String>, line: usize) {
        let depth = self.stack.len();
        let first_doc = self.docs.is_empty();
        let mut unhashable = false;
        match self.stack.last_mut() {
            None => self.docs.push(v),
            Some(Frame::Seq(items, _)) => items.push(v),
            Some(Frame::Map { pairs, key, .. }) => match key.take() {
                None => {
                    unhashable = matches!(v, Py::Seq(_) | Py::Map(_));
                    *key = Some(v);
                    if depth == 1
                        && first_doc
                        && let Some(Py::Str(name)) = key.as_ref()
                    {
                        self.top_lines.entry(name.clone()).or_default().push(line);
                    }
                }
                Some(k) => {
                    if depth == 1
                        && first_doc
                        && let Py::Str(name) = &k
                    {
                        self.top_raw.insert(name.clone(), raw);
                    }
                    match pairs.iter_mut().find(|(pk, _)| *pk == k) {
                        Some(slot) => slot.1 = v,
                        None => pairs.push((k, v)),
                    }
                }
            },
        }
        if unhashable {
            self.fail(
                "while constructing a mapping: found unhashable key".into(),
                line,
            );
        }
    }
}

/// Marks a `<<` key: PyYAML merges the mapping(s) it names.
const MERGE: &str = "\u{0}<<";

impl MarkedEventReceiver for Builder {
    fn on_event(&mut self, ev: Event, mark: Marker) {
        let line = mark.line();
        match ev {
            Event::Scalar(text, style, anchor, tag) => {
                let v = match construct(&text, style, tag.as_ref()) {
                    Ok(v) => v,
                    Err(msg) => {
                        self.fail(msg, line);
                        Py::None
                    }
                };
                // A plain `<<` key is the merge key; keep it apart from
                // a quoted "<<" (which is text).
                let is_merge_key = style == TScalarStyle::Plain
                    && text == "<<"
                    && tag.is_none()
                    && matches!(self.stack.last(), Some(Frame::Map { key: None, .. }));
                if anchor > 0 {
                    self.anchors.insert(anchor, v.clone());
                }
                if is_merge_key {
                    self.push(Py::Str(MERGE.into()), None, line);
                } else {
                    let raw = (style == TScalarStyle::Plain).then_some(text);
                    self.push(v, raw, line);
                }
            }
            Event::Alias(id) => {
                let v = self.anchors.get(&id).cloned().unwrap_or(Py::None);
                self.push(v, None, line);
            }
            Event::SequenceStart(anchor, _) => self.stack.push(Frame::Seq(Vec::new(), anchor)),
            Event::MappingStart(anchor, _) => self.stack.push(Frame::Map {
                pairs: Vec::new(),
                key: None,
                anchor,
            }),
            Event::SequenceEnd => {
                if let Some(Frame::Seq(items, anchor)) = self.stack.pop() {
                    let v = Py::Seq(items);
                    if anchor > 0 {
                        self.anchors.insert(anchor, v.clone());
                    }
                    self.push(v, None, line);
                }
            }
            Event::MappingEnd => {
                if let Some(Frame::Map { pairs, anchor, .. }) = self.stack.pop() {
                    let v = match merge(pairs) {
                        Ok(v) => v,
                        Err(msg) => {
                            self.fail(msg, line);
                            Py::None
                        }
                    };
                    if anchor > 0 {
                        self.anchors.insert(anchor, v.clone());
                    }
                    self.push(v, None, line);
                }
            }
            _ => {}
        }
    }
}

/// PyYAML's `flatten_mapping`: pairs of the mapping(s) under `<<` come
/// first (the first listed wins among them), the mapping's own pairs
/// override them.
fn merge(pairs: Vec<(Py, Py)>) -> Result<Py, String> {
    if !pairs.iter().any(|(k, _)| *k == Py::Str(MERGE.into())) {
        return Ok(Py::Map(pairs));
    }
    let mut merged: Vec<(Py, Py)> = Vec::new();
    let mut own: Vec<(Py, Py)> = Vec::new();
    let add =
        |into: &mut Vec<(Py, Py)>, k: Py, v: Py| match into.iter_mut().find(|(pk, _)| *pk == k) {
            Some(slot) => slot.1 = v,
            None => into.push((k, v)),
        };
    for (k, v) in pairs {
        if k != Py::Str(MERGE.into()) {
            add(&mut own, k, v);
            continue;
        }
        let maps = match v {
            Py::Map(m) => vec![m],
            Py::Seq(items) => {
                let mut maps = Vec::new();
                for item in items {
                    let Py::Map(m) = item else {
                        return Err(
                            "while constructing a mapping: expected a mapping for merging".into(),
                        );
                    };
                    maps.push(m);
                }
                maps
            }
            _ => {
                return Err(
                    "while constructing a mapping: expected a mapping or list of mappings for merging"
                        .into(),
                );
            }
        };
        for m in maps.into_iter().rev() {
            for (k, v) in m {
                add(&mut merged, k, v);
            }
        }
    }
    for (k, v) in own {
        add(&mut merged, k, v);
    }
    Ok(Py::Map(merged))
}

static BOOL: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"^(?:yes|Yes|YES|no|No|NO|true|True|TRUE|false|False|FALSE|on|On|ON|off|Off|OFF)$")
        .expect("regex")
});
static FLOAT: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(
        r"^(?:[-+]?(?:[0-9][0-9_]*)\.[0-9_]*(?:[eE][-+][0-9]+)?|\.[0-9][0-9_]*(?:[eE][-+][0-9]+)?|[-+]?[0-9][0-9_]*(?::[0-5]?[0-9])+\.[0-9_]*|[-+]?\.(?:inf|Inf|INF)|\.(?:nan|NaN|NAN))$",
    )
    .expect("regex")
});
static INT: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(
        r"^(?:[-+]?0b[0-1_]+|[-+]?0[0-7_]+|[-+]?(?:0|[1-9][0-9_]*)|[-+]?0x[0-9a-fA-F_]+|[-+]?[1-9][0-9_]*(?::[0-5]?[0-9])+)$",
    )
    .expect("regex")
});
static NULL: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"^(?:~|null|Null|NULL|)$").expect("regex"));
static TIMESTAMP: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(
        r"^(?P<y>[0-9]{4})-(?P<mo>[0-9]{1,2})-(?P<d>[0-9]{1,2})(?:(?:[Tt]|[ \t]+)(?P<h>[0-9]{1,2}):(?P<mi>[0-9]{2}):(?P<s>[0-9]{2})(?:\.(?P<f>[0-9]*))?(?:[ \t]*(?P<tz>Z|(?P<ts>[-+])(?P<th>[0-9]{1,2})(?::(?P<tm>[0-9]{2}))?))?)?$",
    )
    .expect("regex")
});
static DATE_ONLY: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"^[0-9]{4}-[0-9]{2}-[0-9]{2}$").expect("regex"));

/// The tag PyYAML's resolver gives a plain scalar (YAML 1.1).
fn resolve_plain(text: &str) -> &'static str {
    let first = text.chars().next();
    // PyYAML keys its resolvers by first character; every pattern here
    // starts with a character its list names, so testing all is the same.
    if NULL.is_match(text) {
        "null"
    } else if BOOL.is_match(text) {
        "bool"
    } else if INT.is_match(text) {
        "int"
    } else if FLOAT.is_match(text) {
        "float"
    } else if (DATE_ONLY.is_match(text) || TIMESTAMP.is_match(text) && text.len() > 10)
        && first.is_some_and(|c| c.is_ascii_digit())
    {
        "timestamp"
    } else if text == "=" {
        "value"
    } else {
        "str"
    }
}

/// Builds a scalar's Python value.
fn construct(text: &str, style: TScalarStyle, tag: Option<&Tag>) -> Result<Py, String> {
    let kind = match tag {
        Some(t) if t.handle == "!!" => match t.suffix.as_str() {
            s @ ("str" | "int" | "float" | "bool" | "null" | "timestamp") => s,
            other => return Err(unknown_tag(&format!("tag:yaml.org,2002:{other}"))),
        },
        Some(t) if t.handle == "!" && t.suffix.is_empty() => "str",
        Some(t) if t.handle == "tag:yaml.org,2002:" => match t.suffix.as_str() {
            s @ ("str" | "int" | "float" | "bool" | "null" | "timestamp") => s,
            other => return Err(unknown_tag(&format!("tag:yaml.org,2002:{other}"))),
        },
        Some(t) => return Err(unknown_tag(&format!("{}{}", t.handle, t.suffix))),
        None if style == TScalarStyle::Plain => resolve_plain(text),
        None => "str",
    };
    Ok(match kind {
        "null" => Py::None,
        "bool" => Py::Bool(matches!(
            text.to_ascii_lowercase().as_str(),
            "yes" | "true" | "on"
        )),
        "int" => int(text).ok_or_else(|| bad_value("int", text))?,
        "float" => Py::Float(float(text).ok_or_else(|| bad_value("float", text))?),
        "timestamp" => timestamp(text).ok_or_else(|| bad_value("timestamp", text))?,
        "value" => return Err(unknown_tag("tag:yaml.org,2002:value")),
        _ => Py::Str(text.to_string()),
    })
}

fn unknown_tag(tag: &str) -> String {
    format!("could not determine a constructor for the tag '{tag}'")
}

fn bad_value(kind: &str, text: &str) -> String {
    format!("cannot read {text:?} as {kind}")
}

/// PyYAML's `construct_yaml_int`.
fn int(text: &str) -> Option<Py> {
    let v: String = text.chars().filter(|&c| c != '_').collect();
    let (neg, v) = match v.as_bytes().first() {
        Some(b'-') => (true, &v[1..]),
        Some(b'+') => (false, &v[1..]),
        _ => (false, &v[..]),
    };
    let sign = if neg { -1 } else { 1 };
    let parsed = if v == "0" {
        Some(0)
    } else if let Some(b) = v.strip_prefix("0b") {
        i128::from_str_radix(b, 2).ok()
    } else if let Some(h) = v.strip_prefix("0x") {
        i128::from_str_radix(h, 16).ok()
    } else if let Some(o) = v.strip_prefix('0') {
        i128::from_str_radix(o, 8).ok()
    } else if v.contains(':') {
        v.split(':').try_fold(0i128, |acc, part| {
            acc.checked_mul(60)?.checked_add(part.parse::<i128>().ok()?)
        })
    } else {
        match v.parse::<i128>() {
            Ok(n) => Some(n),
            Err(_) if v.bytes().all(|b| b.is_ascii_digit()) && !v.is_empty() => {
                return Some(Py::BigInt(format!("{}{v}", if neg { "-" } else { "" })));
            }
            Err(_) => None,
        }
    };
    parsed.map(|n| Py::Int(sign * n))
}

/// PyYAML's `construct_yaml_float`.
fn float(text: &str) -> Option<f64> {
    let v: String = text
        .chars()
        .filter(|&c| c != '_')
        .collect::<String>()
        .to_lowercase();
    let (sign, v) = match v.as_bytes().first() {
        Some(b'-') => (-1.0, v[1..].to_string()),
        Some(b'+') => (1.0, v[1..].to_string()),
        _ => (1.0, v),
    };
    if v == ".inf" {
        return Some(sign * f64::INFINITY);
    }
    if v == ".nan" {
        return Some(f64::NAN);
    }
    if v.contains(':') {
        let mut value = 0.0;
        for part in v.split(':') {
            value = value * 60.0 + part.parse::<f64>().ok()?;
        }
        return Some(sign * value);
    }
    v.parse::<f64>().ok().map(|f| sign * f)
}

/// PyYAML's `construct_yaml_timestamp`: a `date`, or a `datetime` (with
/// a UTC offset when one is written), as `(str, repr)`.
fn timestamp(text: &str) -> Option<Py> {
    let c = TIMESTAMP.captures(text)?;
    let num = |n: &str| c.name(n).and_then(|m| m.as_str().parse::<u32>().ok());
    let (y, mo, d) = (num("y")?, num("mo")?, num("d")?);
    if !(1..=12).contains(&mo) || d == 0 || d > days_in_month(y, mo) {
        return None;
    }
    let date = format!("{y:04}-{mo:02}-{d:02}");
    let Some(h) = num("h") else {
        return Some(Py::Time(date, format!("datetime.date({y}, {mo}, {d})")));
    };
    let (mi, s) = (num("mi")?, num("s")?);
    if h > 23 || mi > 59 || s > 59 {
        return None;
    }
    let frac = c.name("f").map(|m| m.as_str()).unwrap_or("");
    let micros: u32 = if frac.is_empty() {
        0
    } else {
        format!("{:0<6}", &frac[..frac.len().min(6)]).parse().ok()?
    };
    let mut out = format!("{date} {h:02}:{mi:02}:{s:02}");
    if micros > 0 {
        out.push_str(&format!(".{micros:06}"));
    }
    let tz = c.name("tz").map(|m| m.as_str());
    match tz {
        None => {}
        Some("Z") => out.push_str("+00:00"),
        Some(_) => {
            let th = num("th")?;
            let tm = num("tm").unwrap_or(0);
            let sign = c.name("ts").map(|m| m.as_str()).unwrap_or("+");
            out.push_str(&format!("{sign}{th:02}:{tm:02}"));
        }
    }
    // The repr of a datetime is long and rarely shown (only inside a list
    // or mapping); the `str()` form stands in for it there.
    Some(Py::Time(out.clone(), out))
}

fn days_in_month(y: u32, m: u32) -> u32 {
    match m {
        2 if (y.is_multiple_of(4) && !y.is_multiple_of(100)) || y.is_multiple_of(400) => 29,
        2 => 28,
        4 | 6 | 9 | 11 => 30,
        _ => 31,
    }
}

/// CPython's `repr(float)`: the shortest text that reads back, in
/// positional form for exponents -4..16, else `1e+16` style.
pub(crate) fn float_repr(f: f64) -> String {
    if f.is_nan() {
        return "nan".into();
    }
    if f.is_infinite() {
        return if f > 0.0 { "inf" } else { "-inf" }.into();
    }
    if f == 0.0 {
        return if f.is_sign_negative() { "-0.0" } else { "0.0" }.into();
    }
    // `{:e}` gives the shortest round-trip digits: `d.ddde<exp>`.
    let e = format!("{f:e}");
    let (mantissa, exp) = e.split_once('e').expect("`{:e}` has an exponent");
    let exp: i32 = exp.parse().expect("exponent");
    let (neg, mantissa) = match mantissa.strip_prefix('-') {
        Some(m) => (true, m),
        None => (false, mantissa),
    };
    let digits: String = mantissa.chars().filter(|c| *c != '.').collect();
    let sign = if neg { "-" } else { "" };
    if (-4..16).contains(&exp) {
        let n = digits.len() as i32;
        let body = if exp < 0 {
            format!("0.{}{}", "0".repeat((-exp - 1) as usize), digits)
        } else if exp + 1 >= n {
            format!("{}{}.0", digits, "0".repeat((exp + 1 - n) as usize))
        } else {
            let (a, b) = digits.split_at((exp + 1) as usize);
            format!("{a}.{b}")
        };
        format!("{sign}{body}")
    } else {
        let (a, b) = digits.split_at(1);
        let frac = if b.is_empty() {
            String::new()
        } else {
            format!(".{b}")
        };
        let esign = if exp < 0 { '-' } else { '+' };
        format!("{sign}{a}{frac}e{esign}{:02}", exp.abs())
    }
}

/// CPython's `repr(str)`: single quotes unless the text holds `'` and no
/// `"`; backslash escapes for `\\`, the quote, `\t`, `\n`, `\r` and other
/// non-printable characters.
pub(crate) fn str_repr(s: &str) -> String {
    let quote = if s.contains('\'') && !s.contains('"') {
        '"'
    } else {
        '\''
    };
    let mut out = String::with_capacity(s.len() + 2);
    out.push(quote);
    for c in s.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '\t' => out.push_str("\\t"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            c if c == quote => {
                out.push('\\');
                out.push(c);
            }
            c if (c as u32) < 0x20 || c as u32 == 0x7f => {
                out.push_str(&format!("\\x{:02x}", c as u32));
            }
            c if c.is_control() || c == '\u{feff}' || ('\u{2028}'..='\u{2029}').contains(&c) => {
                let n = c as u32;
                if n <= 0xff {
                    out.push_str(&format!("\\x{n:02x}"));
                } else {
                    out.push_str(&format!("\\u{n:04x}"));
                }
            }
            c => out.push(c),
        }
    }
    out.push(quote);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn float_repr_matches_cpython() {
        for (f, want) in [
            (1000.0, "1000.0"),
            (1.5, "1.5"),
            (0.1, "0.1"),
            (1e16, "1e+16"),
            (1.5e-5, "1.5e-05"),
            (0.0001, "0.0001"),
            (123456789012345.6, "123456789012345.6"),
            (-2.0, "-2.0"),
            (685230.15, "685230.15"),
        ] {
            assert_eq!(float_repr(f), want, "{f}");
        }
    }

    #[test]
    fn str_repr_quotes_like_cpython() {
        assert_eq!(str_repr("a"), "'a'");
        assert_eq!(str_repr("it's"), "\"it's\"");
        assert_eq!(str_repr("a'\"b"), "'a\\'\"b'");
        assert_eq!(str_repr("t\tn\n"), "'t\\tn\\n'");
        assert_eq!(str_repr("é"), "'é'");
    }

    #[test]
    fn plain_scalars_resolve_as_yaml_1_1() {
        let c = |t| construct(t, TScalarStyle::Plain, None).unwrap();
        assert_eq!(c("017"), Py::Int(15));
        assert_eq!(c("0x1F"), Py::Int(31));
        assert_eq!(c("-0b11"), Py::Int(-3));
        assert_eq!(c("190:20:30"), Py::Int(685230));
        assert_eq!(c("1e3"), Py::Str("1e3".into()));
        assert_eq!(c("1.0e+3"), Py::Float(1000.0));
        assert_eq!(c("Off"), Py::Bool(false));
        assert_eq!(c("y"), Py::Str("y".into()));
        assert_eq!(c("~"), Py::None);
        assert_eq!(
            c("99999999999999999999999999999999999999999").py_str(),
            "99999999999999999999999999999999999999999"
        );
        assert_eq!(
            c("2001-12-14t21:59:43.10-05:00").py_str(),
            "2001-12-14 21:59:43.100000-05:00"
        );
        assert_eq!(c("2002-12-14").py_repr(), "datetime.date(2002, 12, 14)");
        assert_eq!(
            construct("017", TScalarStyle::DoubleQuoted, None).unwrap(),
            Py::Str("017".into())
        );
    }
}
