//! `--name`: which commands to search, by a glob over their names.

use crate::journal::CommandId;

/// Whether `glob` names `command`: its name (`cargo_test`) or its directory in the session
/// (`03-cargo_test`), whole. `*` stands for any run of characters, `?` for one; any other
/// character for itself, so a name without either is matched exactly.
pub fn matches(glob: &str, command: &CommandId) -> bool {
    let glob: Vec<char> = glob.chars().collect();
    [command.name.clone(), command.dir_name()]
        .iter()
        .any(|name| glob_match(&glob, &name.chars().collect::<Vec<_>>()))
}

/// Iterative wildcard matching with one backtrack point (the last `*`): linear enough for
/// names of at most 40 characters.
fn glob_match(glob: &[char], text: &[char]) -> bool {
    let (mut g, mut t) = (0, 0);
    let mut star: Option<(usize, usize)> = None;
    while t < text.len() {
        match glob.get(g) {
            Some('*') => {
                star = Some((g, t));
                g += 1;
            }
            Some(&c) if c == '?' || c == text[t] => {
                g += 1;
                t += 1;
            }
            _ => match star {
                Some((sg, st)) => {
                    g = sg + 1;
                    t = st + 1;
                    star = Some((sg, st + 1));
                }
                None => return false,
            },
        }
    }
    glob[g..].iter().all(|&c| c == '*')
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_glob_matches_the_name_or_the_directory_whole() {
        let command = CommandId::new("s", 3, "cargo test");
        for glob in [
            "cargo_test",
            "03-cargo_test",
            "cargo*",
            "*test",
            "c?rgo_*",
            "*",
        ] {
            assert!(matches(glob, &command), "{glob}");
        }
        for glob in ["cargo", "test", "04-*", "cargo_test?", ""] {
            assert!(!matches(glob, &command), "{glob}");
        }
    }
}
