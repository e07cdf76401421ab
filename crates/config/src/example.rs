//! The commented example `tether.toml` that `tether init` writes: one command per kind of
//! key (readiness, dependencies, restarts, budgets, the environment), stand-ins that run
//! with /bin/sh and python3. A unit test proves it parses, so a key renamed in the parser
//! fails the build's tests rather than a new user's first run.

/// The example, as `tether init` writes it.
pub const EXAMPLE_TOML: &str = include_str!("../../../assets/example.toml");

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_example_parses_with_its_four_commands() {
        let config = super::super::parse(EXAMPLE_TOML, "tether.toml").expect("the example parses");
        let names: Vec<&str> = config.commands.iter().map(|c| c.name.as_str()).collect();
        assert_eq!(names, ["db", "migrate", "web", "worker"]);
    }

    /// The keys of readiness, dependencies, restarts and budgets are written `#merge: KEY`
    /// until their parsers are merged; this fails until every one is a real key again.
    #[test]
    fn the_example_has_no_key_left_for_the_merge() {
        let waiting: Vec<&str> = (EXAMPLE_TOML.lines())
            .filter(|line| line.starts_with("#merge:"))
            .collect();
        assert!(waiting.is_empty(), "uncomment: {waiting:#?}");
    }
}
