//! A cheap nesting-depth guard run on YAML text before it is parsed.
//!
//! The YAML parser reads a whole document into events before the deserializer sees its
//! recursion limit, and its cost grows with the square of the nesting: a 200 KB file of
//! `[` 100,000 deep took 24 s of CPU before "recursion limit exceeded". This guard scans the
//! text once, in linear time and constant memory per open level, and refuses it as soon as
//! the nesting it sees passes [`MAX_DEPTH`], the limit the deserializer enforces anyway.
//!
//! It decides only "too deep or not" and must never refuse a document the parser would
//! accept: its estimate of the depth never exceeds the real depth by more than a level or two
//! (flow brackets, `- `/`? ` indicators and indentation, outside quotes, comments and block
//! scalars), and it never interprets anything else.

/// The deepest nesting accepted: the YAML deserializer's own recursion limit.
pub const MAX_DEPTH: usize = 128;

/// How far past [`MAX_DEPTH`] the guard lets a text through: the deserializer counts levels a
/// little differently (a document of 128 flow levels around a scalar parses), so the guard
/// leaves the last few levels to it; the cost it prevents only appears far deeper.
const SLACK: usize = 8;

/// A document nested deeper than [`MAX_DEPTH`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("line {line}: nested more than {limit} levels deep")]
pub struct TooDeep {
    /// The 1-based line where the limit was passed.
    pub line: usize,
    /// The limit.
    pub limit: usize,
}

/// Refuses a YAML text nested deeper than [`MAX_DEPTH`]; linear in the text's length.
pub fn check_depth(text: &str) -> Result<(), TooDeep> {
    let mut scanner = Scanner::default();
    for (i, line) in text.lines().enumerate() {
        if scanner.line(line) > MAX_DEPTH + SLACK {
            return Err(TooDeep {
                line: i + 1,
                limit: MAX_DEPTH,
            });
        }
    }
    Ok(())
}

/// State carried from line to line.
#[derive(Default)]
struct Scanner {
    /// Open flow collections (`[`, `{`).
    flow: usize,
    /// The quote of a quoted scalar that continues on the next line.
    quote: Option<u8>,
    /// Columns of the open block collections, increasing.
    block: Vec<usize>,
    /// Inside a block scalar (`|`, `>`): lines indented more than this belong to it.
    block_scalar: Option<usize>,
}

impl Scanner {
    /// Scans one line; returns the deepest nesting seen on it.
    fn line(&mut self, line: &str) -> usize {
        let bytes = line.as_bytes();
        let indent = bytes.iter().take_while(|&&b| b == b' ').count();
        if let Some(parent) = self.block_scalar {
            if indent == bytes.len() || indent > parent {
                return 0;
            }
            self.block_scalar = None;
        }
        let mut pos = 0;
        if self.flow == 0 && self.quote.is_none() {
            if indent == bytes.len() || bytes[indent] == b'#' {
                return self.block.len();
            }
            pos = self.block_indicators(bytes, indent);
        }
        self.inline(bytes, pos, indent)
    }

    /// Opens the block collections a line starts (its indentation, then compact `- ` and `? `
    /// indicators); returns where its content starts.
    fn block_indicators(&mut self, bytes: &[u8], indent: usize) -> usize {
        while self.block.last().is_some_and(|&c| c >= indent) {
            self.block.pop();
        }
        self.block.push(indent);
        let mut pos = indent;
        while pos + 1 < bytes.len()
            && matches!(bytes[pos], b'-' | b'?')
            && matches!(bytes[pos + 1], b' ' | b'\t')
        {
            pos += 1;
            while pos < bytes.len() && matches!(bytes[pos], b' ' | b'\t') {
                pos += 1;
            }
            if self.block.len() > MAX_DEPTH + SLACK {
                break;
            }
            self.block.push(pos);
        }
        pos
    }

    /// Scans the rest of a line for flow brackets, quotes, comments and block scalar headers.
    fn inline(&mut self, bytes: &[u8], mut pos: usize, indent: usize) -> usize {
        let mut deepest = self.block.len() + self.flow;
        let mut prev = b' ';
        while pos < bytes.len() {
            let b = bytes[pos];
            if let Some(q) = self.quote {
                pos = self.skip_quoted(bytes, pos, q);
                prev = b'"';
                continue;
            }
            let token_start = matches!(prev, b' ' | b'\t' | b'[' | b'{' | b',')
                || (prev == b':' && self.flow > 0);
            match b {
                b'#' if matches!(prev, b' ' | b'\t') => break,
                b'[' | b'{' if token_start => {
                    self.flow += 1;
                    deepest = deepest.max(self.block.len() + self.flow);
                }
                b']' | b'}' if self.flow > 0 => self.flow -= 1,
                b'"' | b'\'' if token_start => self.quote = Some(b),
                b'|' | b'>' if token_start && self.flow == 0 => {
                    self.block_scalar = Some(indent);
                    break;
                }
                _ => {}
            }
            prev = b;
            pos += 1;
        }
        deepest
    }

    /// Skips quoted text from `pos` (inside a scalar quoted by `q`, after its opening quote); returns the position after
    /// the closing quote, or the line's end when the scalar goes on.
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

    #[test]
    // The test times the guard itself; the core's code never reads the clock.
    #[allow(clippy::disallowed_methods)]
    fn deep_flow_and_block_nesting_is_refused_at_once() {
        // The reproducer: `[` 100,000 deep, a 200 KB file, cost 24 s in the parser.
        let flow = "[".repeat(100_000) + &"]".repeat(100_000);
        let start = std::time::Instant::now();
        let err = check_depth(&flow).unwrap_err();
        assert_eq!(err.line, 1);
        assert!(start.elapsed() < std::time::Duration::from_secs(1));
        assert!(check_depth(&"{a: ".repeat(300)).is_err());
        assert!(check_depth(&("- ".repeat(300) + "1")).is_err());
        let block: String = (0..300).map(|i| format!("{}k:\n", " ".repeat(i))).collect();
        assert!(check_depth(&block).is_err());
        assert!(!parses(&"[".repeat(200)));
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

        /// Arbitrary text: never panics, and is linear enough to stay fast.
        #[test]
        fn arbitrary_text_never_panics(text in "[\\[\\]{}'\"#|>:, \\-?\\\\a\n]{0,2000}") {
            let _ = check_depth(&text);
        }
    }
}
