//! `restart_on_change` patterns: shell globs over paths relative to a command's directory,
//! `*` and `?` within one path segment, `**` across any number of them, `[abc]` a class.
//! Translated to one anchored regex (the regex crate is already here; globset would add a
//! crate for the same three rules).

use regex::Regex;

/// Patterns matched together against a relative path (`src/app/mod.rs`).
#[derive(Debug, Clone)]
pub struct GlobSet {
    regex: Regex,
}

impl GlobSet {
    /// The set of `patterns`; an error names the pattern that is not a glob (an unclosed `[`).
    pub fn new<S: AsRef<str>>(patterns: &[S]) -> Result<GlobSet, String> {
        let alternatives: Vec<String> = (patterns.iter())
            .map(|pattern| translate(pattern.as_ref()))
            .collect::<Result<_, _>>()?;
        let regex = Regex::new(&format!("^(?:{})$", alternatives.join("|")))
            .map_err(|e| format!("not a glob: {e}"))?;
        Ok(GlobSet { regex })
    }

    pub fn matches(&self, path: &str) -> bool {
        self.regex.is_match(path.trim_start_matches("./"))
    }
}

fn translate(glob: &str) -> Result<String, String> {
    let glob = glob.trim_start_matches("./");
    let mut out = String::new();
    let chars: Vec<char> = glob.chars().collect();
    let mut i = 0;
    while i < chars.len() {
        match chars[i] {
            '*' if chars.get(i + 1) == Some(&'*') => {
                // `**/` is any number of directories, none included; a final `**` anything.
                if chars.get(i + 2) == Some(&'/') {
                    out.push_str("(?:[^/]*/)*");
                    i += 3;
                } else {
                    out.push_str(".*");
                    i += 2;
                }
                continue;
            }
            '*' => out.push_str("[^/]*"),
            '?' => out.push_str("[^/]"),
            '[' => {
                let Some(end) = chars[i + 1..].iter().position(|&c| c == ']') else {
                    return Err(format!("`{glob}`: `[` without its `]`"));
                };
                let class: String = chars[i + 1..i + 1 + end].iter().collect();
                let class = class
                    .strip_prefix('!')
                    .map_or(class.clone(), |c| format!("^{c}"));
                out.push_str(&format!("[{}]", class.replace('\\', "\\\\")));
                i += end + 2;
                continue;
            }
            c => out.push_str(&regex::escape(&c.to_string())),
        }
        i += 1;
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::GlobSet;

    #[test]
    fn stars_stay_in_a_segment_and_double_stars_cross_them() {
        let set = GlobSet::new(&["src/**/*.rs", "Cargo.toml"]).unwrap();
        assert!(set.matches("src/main.rs"));
        assert!(set.matches("src/app/deep/mod.rs"));
        assert!(set.matches("./Cargo.toml"));
        assert!(!set.matches("src/main.rs.bak"));
        assert!(!set.matches("tests/a.rs"));
        let one = GlobSet::new(&["*.py"]).unwrap();
        assert!(one.matches("app.py"));
        assert!(!one.matches("lib/app.py"));
    }

    #[test]
    fn classes_and_question_marks() {
        let set = GlobSet::new(&["v?.[ch]", "[!.]*.md"]).unwrap();
        assert!(set.matches("v1.c") && set.matches("v2.h"));
        assert!(!set.matches("v10.c"));
        assert!(set.matches("README.md") && !set.matches(".hidden.md"));
        assert!(GlobSet::new(&["src/[ab"]).is_err());
    }
}
