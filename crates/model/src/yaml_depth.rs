//! Cheap guards run on YAML text before it is parsed: its nesting depth, and how far its
//! aliases would expand it.
//!
//! The YAML parser reads a whole document into events before the deserializer sees its
//! recursion limit, and its cost grows with the square of the nesting: a 200 KB file of
//! `[` 100,000 deep took 24 s of CPU before "recursion limit exceeded". This guard scans the
//! text once, in linear time and constant memory per open level, tokenizing it as the parser's
//! scanner does (a quote or a bracket opens something only where a token starts; inside a plain
//! scalar they are text), and refuses it as soon as the nesting it sees passes [`MAX_DEPTH`],
//! the limit the deserializer enforces anyway.
//!
//! An alias (`*name`) makes the deserializer build its anchor's value again: 250,000 aliases of
//! one object, 1.2 MB of text, grew to 2 GiB. The parser's own limit counts alias uses, not what
//! they expand to, so when the scan sees an alias, a counting pass walks the document as the
//! deserializer would and refuses it once its values would take more than
//! [`EXPANSION_BYTES_PER_BYTE`] times the text's size plus [`EXPANSION_ALLOWANCE`].
//!
//! It decides only "too deep, too big, or not" and must never refuse a document the parser would
//! accept without aliases: its estimate of the depth never exceeds the real depth by more than a
//! level or two (flow brackets and block collections, outside quoted, plain and block scalars and
//! comments), and it never interprets anything else.

use std::cell::Cell;

use serde::de::{DeserializeSeed, Deserializer, EnumAccess, MapAccess, SeqAccess, VariantAccess};

/// The deepest nesting accepted: the YAML deserializer's own recursion limit.
pub const MAX_DEPTH: usize = 128;

/// How far past [`MAX_DEPTH`] the guard lets a text through: the deserializer counts levels a
/// little differently (a document of 128 flow levels around a scalar parses), so the guard
/// leaves the last few levels to it; the cost it prevents only appears far deeper.
const SLACK: usize = 8;

/// What one value costs in the expansion estimate, besides the bytes of its text: about the
/// size of a parsed value. No value takes less than one byte of text, so a text without aliases
/// never costs more than this many bytes per byte.
const VALUE_COST: usize = 32;

/// The expansion a text may have per byte of it: what a text without aliases may reach.
pub const EXPANSION_BYTES_PER_BYTE: usize = VALUE_COST + 1;

/// What aliases may add beyond [`EXPANSION_BYTES_PER_BYTE`], in estimated bytes: room for
/// anchors reused thousands of times (half a million values), while the counting pass stays
/// within seconds.
pub const EXPANSION_ALLOWANCE: usize = 16 << 20;

/// A text refused before parsing.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TooDeep {
    /// Nested deeper than [`MAX_DEPTH`].
    #[error("line {line}: nested more than {limit} levels deep")]
    Nesting {
        /// The 1-based line where the limit was passed.
        line: usize,
        /// The limit.
        limit: usize,
    },
    /// Its aliases would expand it past the bound.
    #[error(
        "document {document}: its aliases expand to more than {limit} bytes of values \
         ({EXPANSION_BYTES_PER_BYTE} per byte of the text plus {} MiB)",
        EXPANSION_ALLOWANCE >> 20
    )]
    Aliases {
        /// The 1-based document (of a multi-document text) where the bound was passed.
        document: usize,
        /// The bound, in estimated bytes.
        limit: usize,
    },
}

/// Walks the documents of a text as the deserializer would build them, aliases expanded, and
/// refuses it once the estimated size passes the bound; a text that does not parse is left to
/// the parser to report.
fn check_aliases(text: &str) -> Result<(), TooDeep> {
    let limit = text
        .len()
        .saturating_mul(EXPANSION_BYTES_PER_BYTE)
        .saturating_add(EXPANSION_ALLOWANCE);
    let budget = Cell::new(limit);
    for (i, doc) in serde_yaml_ng::Deserializer::from_str(text).enumerate() {
        if Count(&budget).deserialize(doc).is_err() {
            if budget.get() == 0 {
                return Err(TooDeep::Aliases {
                    document: i + 1,
                    limit,
                });
            }
            return Ok(());
        }
    }
    Ok(())
}

/// Counts the values a document builds against a budget of estimated bytes.
#[derive(Clone, Copy)]
struct Count<'a>(&'a Cell<usize>);

impl Count<'_> {
    /// Takes the cost of one value holding `len` bytes of text; an error once spent.
    fn take<E: serde::de::Error>(self, len: usize) -> Result<(), E> {
        match self.0.get().checked_sub(VALUE_COST + len) {
            Some(left) => {
                self.0.set(left);
                Ok(())
            }
            None => {
                self.0.set(0);
                Err(E::custom("expansion bound reached"))
            }
        }
    }
}

impl<'de> DeserializeSeed<'de> for Count<'_> {
    type Value = ();

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> serde::de::Visitor<'de> for Count<'_> {
    type Value = ();

    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("any YAML value")
    }

    fn visit_bool<E: serde::de::Error>(self, _: bool) -> Result<(), E> {
        self.take(0)
    }

    fn visit_i64<E: serde::de::Error>(self, _: i64) -> Result<(), E> {
        self.take(0)
    }

    fn visit_u64<E: serde::de::Error>(self, _: u64) -> Result<(), E> {
        self.take(0)
    }

    fn visit_i128<E: serde::de::Error>(self, _: i128) -> Result<(), E> {
        self.take(0)
    }

    fn visit_u128<E: serde::de::Error>(self, _: u128) -> Result<(), E> {
        self.take(0)
    }

    fn visit_f64<E: serde::de::Error>(self, _: f64) -> Result<(), E> {
        self.take(0)
    }

    fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<(), E> {
        self.take(v.len())
    }

    fn visit_bytes<E: serde::de::Error>(self, v: &[u8]) -> Result<(), E> {
        self.take(v.len())
    }

    fn visit_unit<E: serde::de::Error>(self) -> Result<(), E> {
        self.take(0)
    }

    fn visit_none<E: serde::de::Error>(self) -> Result<(), E> {
        self.take(0)
    }

    fn visit_some<D: Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        self.deserialize(d)
    }

    fn visit_newtype_struct<D: Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        self.deserialize(d)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
        self.take(0)?;
        while seq.next_element_seed(self)?.is_some() {}
        Ok(())
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        self.take(0)?;
        while map.next_key_seed(self)?.is_some() {
            map.next_value_seed(self)?;
        }
        Ok(())
    }

    /// A tagged value (`!tag value`).
    fn visit_enum<A: EnumAccess<'de>>(self, data: A) -> Result<(), A::Error> {
        let ((), variant) = data.variant_seed(self)?;
        variant.newtype_variant_seed(self)
    }
}

/// Refuses a YAML text nested deeper than [`MAX_DEPTH`], or whose aliases would expand it past
/// [`MAX_EXPANDED_NODES`] more nodes than it holds: linear in the text's length, and in the
/// bound for the aliases.
pub fn check_depth(text: &str) -> Result<(), TooDeep> {
    let mut scanner = Scanner::default();
    for (i, line) in Lines(text.as_bytes()).enumerate() {
        if scanner.line(line) > MAX_DEPTH + SLACK {
            return Err(TooDeep::Nesting {
                line: i + 1,
                limit: MAX_DEPTH,
            });
        }
    }
    if scanner.aliases {
        check_aliases(text)?;
    }
    Ok(())
}

/// The lines of a text, split at every line break the YAML reader knows: `\n`, `\r\n`, a lone
/// `\r`, and NEL, LS and PS (U+0085, U+2028, U+2029); splitting at `\n` only would let a lone
/// `\r` hide a line from the guard while the parser reads it.
struct Lines<'a>(&'a [u8]);

impl<'a> Iterator for Lines<'a> {
    type Item = &'a [u8];

    fn next(&mut self) -> Option<&'a [u8]> {
        if self.0.is_empty() {
            return None;
        }
        let bytes = self.0;
        let mut i = 0;
        while i < bytes.len() {
            let len = match bytes[i] {
                b'\n' => 1,
                b'\r' if bytes.get(i + 1) == Some(&b'\n') => 2,
                b'\r' => 1,
                0xC2 if bytes.get(i + 1) == Some(&0x85) => 2,
                0xE2 if bytes.get(i + 1) == Some(&0x80)
                    && matches!(bytes.get(i + 2), Some(0xA8 | 0xA9)) =>
                {
                    3
                }
                _ => 0,
            };
            if len > 0 {
                self.0 = &bytes[i + len..];
                return Some(&bytes[..i]);
            }
            i += 1;
        }
        self.0 = &[];
        Some(bytes)
    }
}

/// A block scalar (`|`, `>`) whose lines are being skipped.
#[derive(Clone, Copy)]
struct BlockScalar {
    /// The fewest spaces its first non-empty line may have.
    min: usize,
    /// The indentation of its lines, once known (given by an indicator, or by its first line).
    indent: Option<usize>,
}

/// State carried from line to line, as the YAML reader's scanner carries it.
#[derive(Default)]
struct Scanner {
    /// Open flow collections (`[`, `{`).
    flow: usize,
    /// Columns of the open block collections, increasing (the reader's indentation stack: a
    /// sequence written at its mapping's column opens none).
    indents: Vec<usize>,
    /// The quote of a quoted scalar that goes on (on this line or the next).
    quote: Option<u8>,
    /// Inside a plain scalar, which may go on on the next line: in a flow collection always,
    /// in block context when that line is indented deeper than the innermost collection.
    plain: bool,
    /// Inside a block scalar.
    block_scalar: Option<BlockScalar>,
    /// An alias (`*name`) was seen.
    aliases: bool,
}

/// Whether a byte ends a token as a blank or the end of the line does.
fn blank(b: Option<&u8>) -> bool {
    matches!(b, None | Some(b' ' | b'\t'))
}

impl Scanner {
    /// The column of the innermost block collection, -1 outside any.
    fn indent(&self) -> isize {
        self.indents.last().map_or(-1, |&c| c as isize)
    }

    /// Opens a block collection at `column` unless one is open there or deeper, as the reader
    /// does on `- `, `? ` and a key's `: `.
    fn roll(&mut self, column: usize) {
        if self.flow == 0 && self.indent() < column as isize {
            self.indents.push(column);
        }
    }

    /// Scans one line; returns the deepest nesting seen on it.
    fn line(&mut self, bytes: &[u8]) -> usize {
        let indent = bytes.iter().take_while(|&&b| b == b' ').count();
        let empty = bytes[indent..].iter().all(|&b| matches!(b, b' ' | b'\t'));
        if let Some(scalar) = self.block_scalar {
            match scalar.indent {
                _ if empty => return 0,
                Some(i) if indent >= i => return 0,
                None if indent >= scalar.min => {
                    self.block_scalar = Some(BlockScalar {
                        indent: Some(indent),
                        ..scalar
                    });
                    return 0;
                }
                _ => self.block_scalar = None,
            }
        }
        if self.quote.is_some() || self.flow > 0 {
            // Quoted scalars and flow collections go on whatever the indentation.
            return self.inline(bytes, 0);
        }
        if empty {
            // An empty line folds a plain scalar; it does not end it.
            return self.indents.len();
        }
        if bytes[indent] == b'#' {
            self.plain = false;
            return self.indents.len();
        }
        let marker = bytes.starts_with(b"---") || bytes.starts_with(b"...");
        let marker = marker && blank(bytes.get(3));
        if self.plain && indent as isize > self.indent() && !marker {
            return self.inline(bytes, indent);
        }
        self.plain = false;
        if marker {
            // A document starts or ends: every collection is closed.
            self.indents.clear();
            return self.inline(bytes, 3);
        }
        if bytes[0] == b'%' {
            // A directive.
            return 0;
        }
        while self.indent() > indent as isize {
            self.indents.pop();
        }
        self.inline(bytes, indent)
    }

    /// Scans a line from `pos` as the reader tokenizes it: flow brackets, block indicators,
    /// quoted, plain and block scalars, anchors, aliases, tags and comments.
    fn inline(&mut self, bytes: &[u8], mut pos: usize) -> usize {
        let limit = MAX_DEPTH + SLACK;
        let mut deepest = self.indents.len() + self.flow;
        // Where the node being read on this line started: the column of a key once `: ` comes.
        let mut key: Option<usize> = None;
        while pos < bytes.len() && deepest <= limit {
            if let Some(q) = self.quote {
                pos = self.skip_quoted(bytes, pos, q);
                continue;
            }
            let b = bytes[pos];
            let next = bytes.get(pos + 1);
            if self.plain {
                // Inside a plain scalar quotes, brackets in block context, `|`, `&`... are text.
                match b {
                    b':' if blank(next) => {
                        self.plain = false;
                        self.roll(key.unwrap_or(pos));
                        key = None;
                    }
                    b':' if self.flow > 0
                        && matches!(next, Some(b',' | b'?' | b'[' | b']' | b'{' | b'}')) =>
                    {
                        self.plain = false;
                        key = None;
                    }
                    b',' | b'[' | b']' | b'{' | b'}' if self.flow > 0 => {
                        // Ends the scalar; read again as a token.
                        self.plain = false;
                        continue;
                    }
                    b' ' | b'\t' => {
                        let rest = bytes[pos..]
                            .iter()
                            .position(|&c| !matches!(c, b' ' | b'\t'));
                        match rest {
                            Some(n) if bytes[pos + n] == b'#' => {
                                self.plain = false;
                                break;
                            }
                            Some(n) => pos += n - 1,
                            None => break,
                        }
                    }
                    _ => {}
                }
                pos += 1;
                continue;
            }
            match b {
                b' ' | b'\t' => {}
                b'#' => break,
                b'[' | b'{' => {
                    if self.flow == 0 {
                        key.get_or_insert(pos);
                    }
                    self.flow += 1;
                    deepest = deepest.max(self.indents.len() + self.flow);
                }
                b']' | b'}' => self.flow = self.flow.saturating_sub(1),
                b',' => {}
                b'-' if blank(next) => {
                    self.roll(pos);
                    key = None;
                    deepest = deepest.max(self.indents.len() + self.flow);
                }
                b'?' | b':' if self.flow > 0 || blank(next) => {
                    self.roll(if b == b':' { key.unwrap_or(pos) } else { pos });
                    key = None;
                    deepest = deepest.max(self.indents.len() + self.flow);
                }
                b'&' | b'*' | b'!' => {
                    self.aliases |= b == b'*';
                    key.get_or_insert(pos);
                    // The name or tag: up to a blank, or for anchors and aliases up to the
                    // first character a name cannot hold.
                    let tag = b == b'!';
                    let len = bytes[pos + 1..]
                        .iter()
                        .position(|&c| {
                            let name_char = c.is_ascii_alphanumeric() || c == b'-' || c == b'_';
                            matches!(c, b' ' | b'\t') || !(tag || name_char)
                        })
                        .unwrap_or(bytes.len() - pos - 1);
                    pos += len;
                }
                b'|' | b'>' if self.flow == 0 => {
                    self.block_scalar = Some(self.block_scalar_header(&bytes[pos + 1..]));
                    break;
                }
                b'\'' | b'"' => {
                    key.get_or_insert(pos);
                    self.quote = Some(b);
                }
                _ => {
                    key.get_or_insert(pos);
                    self.plain = true;
                }
            }
            pos += 1;
        }
        deepest
    }

    /// The lines a block scalar holds, from its header after `|` or `>` (an indentation
    /// indicator sets them; otherwise its first non-empty line, indented deeper than the
    /// innermost collection, does).
    fn block_scalar_header(&self, header: &[u8]) -> BlockScalar {
        let parent = self.indent();
        let given = header
            .iter()
            .take(2)
            .find(|c| matches!(c, b'1'..=b'9'))
            .map(|&c| usize::from(c - b'0'));
        let base = usize::try_from(parent).unwrap_or(0);
        match given {
            Some(n) => BlockScalar {
                min: 0,
                indent: Some(if parent >= 0 { base + n } else { n }),
            },
            None => BlockScalar {
                min: (parent + 1).max(1) as usize,
                indent: None,
            },
        }
    }

    /// Skips quoted text from `pos` (inside a scalar quoted by `q`, after its opening quote);
    /// returns the position after the closing quote, or the line's end when the scalar goes on.
    fn skip_quoted(&mut self, bytes: &[u8], mut pos: usize, q: u8) -> usize {
        while pos < bytes.len() {
            match bytes[pos] {
                b'\\' if q == b'"' => pos += 2,
                b'\'' if q == b'\'' && bytes.get(pos + 1) == Some(&b'\'') => pos += 2,
                c if c == q => {
                    self.quote = None;
                    return pos + 1;
                }
                _ => pos += 1,
            }
        }
        bytes.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use serde_json::{Value, json};

    fn parses(text: &str) -> bool {
        serde_yaml_ng::from_str::<Value>(text).is_ok()
    }

    fn too_deep(text: &str) -> bool {
        matches!(check_depth(text), Err(TooDeep::Nesting { .. }))
    }

    #[test]
    // The test times the guard itself; the core's code never reads the clock.
    #[allow(clippy::disallowed_methods)]
    fn deep_flow_and_block_nesting_is_refused_at_once() {
        // The reproducer: `[` 100,000 deep, a 200 KB file, cost 24 s in the parser.
        let flow = "[".repeat(100_000) + &"]".repeat(100_000);
        let start = std::time::Instant::now();
        let err = check_depth(&flow).unwrap_err();
        assert_eq!(
            err,
            TooDeep::Nesting {
                line: 1,
                limit: MAX_DEPTH
            }
        );
        assert!(start.elapsed() < std::time::Duration::from_secs(1));
        assert!(too_deep(&"{a: ".repeat(300)));
        assert!(too_deep(&("- ".repeat(300) + "1")));
        let block: String = (0..300).map(|i| format!("{}k:\n", " ".repeat(i))).collect();
        assert!(too_deep(&block));
        assert!(!parses(&"[".repeat(200)));
    }

    /// A quote inside a plain scalar is text: it once opened a "quoted scalar" in the guard
    /// that hid the next line, whose 100,000 `[` then ran in the parser for minutes.
    #[test]
    fn a_quote_inside_a_plain_scalar_hides_nothing() {
        let deep = "[".repeat(100_000);
        for first in [
            "name: x 'y",
            "name: x \"y",
            "- x 'y",
            "name: it's",
            "? x 'y",
            "k: [a 'b, c]",
        ] {
            let text = format!("{first}\nduration: {deep}\n");
            assert_eq!(
                check_depth(&text),
                Err(TooDeep::Nesting {
                    line: 2,
                    limit: MAX_DEPTH
                }),
                "{first}"
            );
        }
        // A plain scalar going on over more indented lines holds their quotes too.
        let text = format!("k: x\n  'y\nduration: {deep}\n");
        assert!(too_deep(&text));
        // Quotes where a scalar starts do open quoted scalars, over lines.
        let quoted = format!("k: 'x\n  {deep}'\nj: \"a\\\" {deep}\"\n");
        assert_eq!(check_depth(&quoted), Ok(()));
        assert!(parses(&quoted));
    }

    /// Every line break the parser knows ends a line for the guard too.
    #[test]
    fn every_line_break_counts() {
        let deep = "[".repeat(1000);
        for br in ["\r", "\u{85}", "\u{2028}", "\u{2029}"] {
            assert!(too_deep(&format!("name: x{br}duration: {deep}")), "{br:?}");
            // A comment ends at the break: what follows is read.
            assert!(too_deep(&format!("# note{br}duration: {deep}")), "{br:?}");
        }
    }

    /// A block scalar holds only the lines indented as deep as its first one, deeper than its
    /// collection: a line less indented is read by the parser, so by the guard too.
    #[test]
    fn block_scalars_hold_only_their_own_lines() {
        let deep = "[".repeat(1000);
        assert!(too_deep(&format!("- k: |\n  {deep}\n")));
        assert!(too_deep(&format!("k: |\n    text\n  {deep}\n")));
        assert!(too_deep(&format!("k: |2\n   x\n {deep}\n")));
        let held = format!("k: |\n    {deep}\n\n    [[\nj: >-\n  {deep}\n");
        assert!(parses(&held));
        assert_eq!(check_depth(&held), Ok(()));
    }

    /// Brackets and quotes inside plain scalars are text: valid documents are not refused.
    #[test]
    fn plain_scalars_with_brackets_pass() {
        let many = "[".repeat(300);
        for doc in [
            format!("a: x {many}\n"),
            format!("a: x\n  {many}\n"),
            format!("- x 'y {many}\n- \"{many}\"\n"),
            format!("a: [x'y, \"{many}\"]\n"),
        ] {
            assert!(parses(&doc), "{doc}");
            assert_eq!(check_depth(&doc), Ok(()), "{doc}");
        }
    }

    #[test]
    fn ordinary_documents_pass() {
        let doc = concat!(
            "apiVersion: v1\nkind: Pod\nmetadata:\n  name: p # [[[[\n  annotations:\n",
            "    a: '[[[[[[[['\n    b: \"{{{{\\\"{{{\"\n    c: |\n      [[[[[[[[[[\n      {{{{{{\n",
            "    d: x[y{z\nspec:\n  containers:\n  - - - name: c\n        resources: {limits: {cpu: [1]}}\n",
        );
        assert!(parses(doc), "the fixture is valid YAML");
        assert_eq!(check_depth(doc), Ok(()));
        let inner = "[".repeat(100) + &"]".repeat(100);
        assert_eq!(check_depth(&inner), Ok(()));
        assert!(parses(&inner));
    }

    /// 250,000 aliases of one object (1.2 MB) once grew to 2 GiB: refused, naming the document.
    #[test]
    // The test times the guard itself; the core's code never reads the clock.
    #[allow(clippy::disallowed_methods)]
    fn aliases_are_bounded_by_what_they_expand_to() {
        let object = (0..100).map(|i| format!("k{i}: v{i}")).collect::<Vec<_>>();
        let object = format!("{{{}}}", object.join(", "));
        let text = format!(
            "a: 1\n---\nitems:\n- &a {object}\n{}",
            "- *a\n".repeat(250_000)
        );
        let start = std::time::Instant::now();
        let err = check_depth(&text).unwrap_err();
        assert!(matches!(err, TooDeep::Aliases { document: 2, .. }), "{err}");
        // The counting pass walks about a value per byte before it stops (a debug build on a
        // busy machine is slow; the bound is for hangs).
        assert!(start.elapsed() < std::time::Duration::from_secs(30));
        // A few uses of an anchor, as a scenario writes them, pass.
        let few = format!("p: &p {object}\nq: [*p, *p, *p]\n");
        assert!(parses(&few));
        assert_eq!(check_depth(&few), Ok(()));
        // An unknown anchor is the parser's to report.
        assert_eq!(check_depth("a: *nothing\n"), Ok(()));
    }

    fn nested(depth: usize, flow: bool) -> Value {
        let mut v = json!(1);
        for i in 0..depth {
            v = match (i % 2, flow) {
                (0, _) => json!([v, "x"]),
                _ => json!({"k": v, "s": "it's [a] {test}: # no"}),
            };
        }
        v
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(crate::testing::fuzz_cases(24)))]

        /// Never refuses what the parser accepts, on block and flow renderings of documents up
        /// to the limit, and always refuses past it.
        #[test]
        fn agrees_with_the_parser(depth in 1usize..300, flow: bool) {
            let v = nested(depth, flow);
            let text = if flow {
                serde_json::to_string(&v).unwrap()
            } else {
                serde_yaml_ng::to_string(&v).unwrap()
            };
            if parses(&text) {
                prop_assert_eq!(check_depth(&text), Ok(()));
            }
            // Block sequences inside mappings may share their indentation, so block
            // nesting is counted at worst half; cost stays bounded either way.
            let sure = if flow { MAX_DEPTH + SLACK + 2 } else { 2 * (MAX_DEPTH + SLACK) + 2 };
            if depth > sure {
                prop_assert!(check_depth(&text).is_err());
            }
        }

        /// Plain scalars holding quotes and brackets, then a deep line: whatever the scalar
        /// holds, the deep line is refused, and documents the parser accepts are not.
        #[test]
        fn plain_scalars_never_hide_a_line(scalar in "[a-z][a-z '\"\\[\\]{}#:,]{0,20}") {
            // `: ` ends the scalar: what follows is a new token, a quote there opens a quoted
            // scalar for the parser too (or the parser stops at the second `: `).
            prop_assume!(!scalar.contains(": ") && !scalar.ends_with(':'));
            let deep = "[".repeat(500);
            let text = format!("name: {scalar}\nduration: {deep}\n");
            prop_assert!(check_depth(&text).is_err(), "{}", text);
            let text = format!("name: {scalar}\n");
            if parses(&text) {
                prop_assert_eq!(check_depth(&text), Ok(()));
            }
        }

        /// Arbitrary text: never panics, and is linear enough to stay fast.
        #[test]
        fn arbitrary_text_never_panics(text in "[\\[\\]{}'\"#|>:, \\-?\\\\&*!a\n\r]{0,2000}") {
            let _ = check_depth(&text);
        }
    }
}
