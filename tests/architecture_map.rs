//! ARCHITECTURE.md's module map stays complete: every module under `src/` and under each
//! crate's `crates/NAME/src/` (as `tether_NAME::module`, or as the path the tether crate
//! re-exports it at: `tether_model::command` is `model::command`) has its row, or is named
//! (in backticks) in the row of a module that holds it.

use std::collections::BTreeSet;
use std::path::Path;

/// Every module path (`broker::control`) under `dir`, as files and directories make them.
fn modules(dir: &Path, prefix: &str, found: &mut BTreeSet<String>) {
    let mut entries: Vec<_> = std::fs::read_dir(dir)
        .expect("src/ is readable")
        .flatten()
        .collect();
    entries.sort_by_key(|e| e.file_name());
    for entry in entries {
        let name = entry.file_name().to_string_lossy().into_owned();
        let path = entry.path();
        let module = if path.is_dir() {
            name.clone()
        } else if let Some(stem) = name.strip_suffix(".rs") {
            stem.to_string()
        } else {
            continue;
        };
        // Unit tests beside their code are part of the module that holds them.
        if module == "tests" || ["main", "lib", "mod"].contains(&module.as_str()) {
            continue;
        }
        let full = if prefix.is_empty() {
            module.clone()
        } else {
            format!("{prefix}::{module}")
        };
        found.insert(full.clone());
        if path.is_dir() {
            modules(&path, &full, found);
        }
    }
}

/// The map's rows: the module in the first cell, and the whole row's text.
fn rows(map: &str) -> Vec<(String, String)> {
    let start = map
        .find("## Module map")
        .expect("ARCHITECTURE.md has a module map");
    map[start..]
        .lines()
        .skip(1)
        .take_while(|line| !line.starts_with("## "))
        .filter_map(|line| {
            let cell = line.strip_prefix("| `")?;
            let end = cell.find('`')?;
            Some((
                cell[..end].trim_end_matches(".rs").to_string(),
                line.to_string(),
            ))
        })
        .collect()
}

/// The tether crate's re-exports of a lower crate's modules, read from `src/lib.rs`: the
/// crate path and the path it is named by (`tether_config` as `config`,
/// `tether_broker::broker` as `broker`).
fn reexports(lib: &str) -> Vec<(String, String)> {
    let mut found = Vec::new();
    for line in lib.lines() {
        let Some(used) = line
            .strip_prefix("pub use ")
            .and_then(|l| l.strip_suffix(';'))
        else {
            continue;
        };
        if let Some((krate, alias)) = used.split_once(" as ") {
            found.push((krate.to_string(), alias.to_string()));
        } else if let Some((krate, names)) = used.split_once("::{") {
            for name in names.trim_end_matches('}').split(',') {
                let name = name.trim();
                found.push((format!("{krate}::{name}"), name.to_string()));
            }
        }
    }
    found
}

/// `module` as the tether crate names it, when it re-exports it.
fn named_as(module: &str, reexported: &[(String, String)]) -> Option<String> {
    reexported.iter().find_map(|(path, alias)| {
        let rest = module.strip_prefix(path.as_str())?;
        (rest.is_empty() || rest.starts_with("::")).then(|| format!("{alias}{rest}"))
    })
}

#[test]
fn every_module_is_in_the_architecture_map() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut found = BTreeSet::new();
    modules(&root.join("src"), "", &mut found);
    let crates = std::fs::read_dir(root.join("crates")).expect("crates/ is readable");
    for krate in crates.flatten() {
        let name = format!("tether_{}", krate.file_name().to_string_lossy());
        found.insert(name.clone());
        modules(&krate.path().join("src"), &name, &mut found);
    }
    let map = std::fs::read_to_string(root.join("ARCHITECTURE.md")).expect("ARCHITECTURE.md");
    let rows = rows(&map);
    let lib = std::fs::read_to_string(root.join("src/lib.rs")).expect("src/lib.rs");
    let reexported = reexports(&lib);
    let in_map = |module: &str| {
        if rows.iter().any(|(name, _)| name == module) {
            return true;
        }
        // Named in the row of a module that holds it: `cgroup` names `hierarchy`.
        let parts: Vec<&str> = module.split("::").collect();
        let leaf = format!("`{}`", parts[parts.len() - 1]);
        (1..parts.len()).any(|n| {
            let holder = parts[..n].join("::");
            rows.iter()
                .any(|(name, row)| *name == holder && row.contains(&leaf))
        })
    };
    let missing: Vec<&String> = found
        .iter()
        .filter(|module| {
            !in_map(module) && !named_as(module, &reexported).is_some_and(|alias| in_map(&alias))
        })
        .collect();
    assert!(
        missing.is_empty(),
        "modules missing from ARCHITECTURE.md's module map: {missing:?}"
    );
}
