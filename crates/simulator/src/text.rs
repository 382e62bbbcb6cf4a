//! Small wording helpers shared by the reports the binary prints. Formatting only: it decides
//! no figure and never reads anything.

/// `n word`, with `word` in the plural (an `s` appended) unless `n` is 1: "1 node", "2 nodes".
pub fn count(n: impl Into<u64>, word: &str) -> String {
    let n = n.into();
    format!("{n} {word}{}", if n == 1 { "" } else { "s" })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn singular_only_for_one() {
        assert_eq!(count(1u64, "scale-up"), "1 scale-up");
        assert_eq!(count(0u64, "scale-up"), "0 scale-ups");
        assert_eq!(count(2u32, "node"), "2 nodes");
    }
}
