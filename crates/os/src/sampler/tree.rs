//! Turning a flat list of processes into the rows of the process-tree pane. Pure: no I/O.

use std::collections::{HashMap, HashSet};

use super::ProcessInfo;

#[derive(Debug, Clone, PartialEq)]
pub struct TreeRow {
    pub depth: usize,
    pub process: ProcessInfo,
    /// Left the command's process group (setsid etc.)
    pub escaped: bool,
}

/// Depth-first rows: the root (depth 0), then children sorted by pid, each followed by its
/// own subtree.
///
/// `group` is the command's process group: processes with another pgid are marked escaped
/// (the root is never marked). Processes whose parent is not in the list hang directly under
/// the root, and so do processes caught in a parent cycle (which a racy /proc scan can
/// produce after pid reuse), so every process appears exactly once. An absent root gives no
/// rows.
pub fn build_tree(root: i32, processes: &[ProcessInfo], group: Option<i32>) -> Vec<TreeRow> {
    let mut by_pid: HashMap<i32, &ProcessInfo> = HashMap::with_capacity(processes.len());
    for process in processes {
        by_pid.entry(process.pid).or_insert(process);
    }
    let Some(root_process) = by_pid.get(&root).copied() else {
        return Vec::new();
    };

    let mut children: HashMap<i32, Vec<&ProcessInfo>> = HashMap::new();
    for process in by_pid.values() {
        if process.pid == root {
            continue;
        }
        let parent = if process.ppid != process.pid && by_pid.contains_key(&process.ppid) {
            process.ppid
        } else {
            root
        };
        children.entry(parent).or_default().push(process);
    }
    for kids in children.values_mut() {
        kids.sort_by_key(|p| p.pid);
    }

    let mut rows = Vec::with_capacity(by_pid.len());
    let mut visited = HashSet::with_capacity(by_pid.len());
    rows.push(TreeRow {
        depth: 0,
        // The root is the broker, whatever its command line says: a broker forked from
        // the shell shim has the shim's (`bash -c ...`).
        process: ProcessInfo {
            argv: vec!["tether".into(), "broker".into()],
            ..root_process.clone()
        },
        escaped: false,
    });
    visited.insert(root);
    walk(root, 1, group, &children, &mut visited, &mut rows);

    // Whatever the walk did not reach sits in a cycle: hang each cycle under the root.
    let mut stranded: Vec<&ProcessInfo> = by_pid
        .values()
        .filter(|p| !visited.contains(&p.pid))
        .copied()
        .collect();
    stranded.sort_by_key(|p| p.pid);
    for process in stranded {
        if visited.insert(process.pid) {
            rows.push(row(process, 1, group));
            walk(process.pid, 2, group, &children, &mut visited, &mut rows);
        }
    }
    rows
}

/// Appends the subtree below `pid`, children at `depth`. Iterative, so a 10,000-deep chain
/// cannot overflow the stack.
fn walk<'p>(
    pid: i32,
    depth: usize,
    group: Option<i32>,
    children: &HashMap<i32, Vec<&'p ProcessInfo>>,
    visited: &mut HashSet<i32>,
    rows: &mut Vec<TreeRow>,
) {
    let mut stack: Vec<(&'p ProcessInfo, usize)> = Vec::new();
    let push_children = |stack: &mut Vec<(&'p ProcessInfo, usize)>, pid: i32, depth: usize| {
        if let Some(kids) = children.get(&pid) {
            stack.extend(kids.iter().rev().map(|&kid| (kid, depth)));
        }
    };
    push_children(&mut stack, pid, depth);
    while let Some((process, depth)) = stack.pop() {
        if visited.insert(process.pid) {
            rows.push(row(process, depth, group));
            push_children(&mut stack, process.pid, depth + 1);
        }
    }
}

fn row(process: &ProcessInfo, depth: usize, group: Option<i32>) -> TreeRow {
    TreeRow {
        depth,
        process: process.clone(),
        escaped: group.is_some_and(|g| crate::procfs::escaped(process.pgid, process.sid, g)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(pid: i32, ppid: i32, pgid: i32) -> ProcessInfo {
        ProcessInfo {
            pid,
            ppid,
            pgid,
            sid: 1,
            state: 'S',
            cpu_percent: 0.0,
            rss_bytes: 0,
            start_ms: 0,
            argv: vec![format!("p{pid}")],
        }
    }

    fn shape(rows: &[TreeRow]) -> Vec<(usize, i32, bool)> {
        rows.iter()
            .map(|r| (r.depth, r.process.pid, r.escaped))
            .collect()
    }

    #[test]
    fn nests_depth_first_with_children_sorted_by_pid() {
        let processes = [
            p(100, 1, 100),
            p(300, 100, 200),
            p(200, 100, 200),
            p(250, 200, 200),
            p(210, 200, 200),
            p(400, 250, 200),
        ];
        let rows = build_tree(100, &processes, Some(200));
        assert_eq!(
            shape(&rows),
            [
                (0, 100, false),
                (1, 200, false),
                (2, 210, false),
                (2, 250, false),
                (3, 400, false),
                (1, 300, false),
            ]
        );
        assert_eq!(rows[3].process, processes[3]);
    }

    #[test]
    fn escapees_are_marked_and_stay_where_their_parent_is() {
        // 201 called setsid but its parent lives; 500 escaped and was re-parented to the broker.
        let processes = [
            p(100, 1, 100),
            p(200, 100, 200),
            p(201, 200, 201),
            p(202, 201, 201),
            p(500, 100, 500),
        ];
        assert_eq!(
            shape(&build_tree(100, &processes, Some(200))),
            [
                (0, 100, false),
                (1, 200, false),
                (2, 201, true),
                (3, 202, true),
                (1, 500, true),
            ]
        );
        // Without a known group nothing is marked.
        assert!(build_tree(100, &processes, None).iter().all(|r| !r.escaped));
    }

    #[test]
    fn root_is_never_marked_escaped() {
        // The broker runs in its own session, so its pgid differs from the command's group.
        let rows = build_tree(100, &[p(100, 1, 100), p(200, 100, 200)], Some(200));
        assert_eq!(shape(&rows), [(0, 100, false), (1, 200, false)]);
    }

    #[test]
    fn orphans_hang_under_the_root() {
        // 300's parent 250 exited between scans; it sorts among the root's children.
        let processes = [
            p(300, 250, 200),
            p(100, 1, 100),
            p(200, 100, 200),
            p(301, 300, 200),
        ];
        assert_eq!(
            shape(&build_tree(100, &processes, Some(200))),
            [
                (0, 100, false),
                (1, 200, false),
                (1, 300, false),
                (2, 301, false)
            ]
        );
    }

    #[test]
    fn cycles_and_self_parents_terminate_and_keep_every_process_once() {
        let processes = [
            p(100, 1, 100),
            p(200, 100, 200),
            p(300, 300, 200), // its own parent
            p(400, 500, 200), // 400 <-> 500
            p(500, 400, 200),
            p(600, 500, 200),
            p(100, 600, 100), // a duplicate root entry: the first one wins
        ];
        let rows = build_tree(100, &processes, Some(200));
        assert_eq!(
            shape(&rows),
            [
                (0, 100, false),
                (1, 200, false),
                (1, 300, false),
                (1, 400, false),
                (2, 500, false),
                (3, 600, false),
            ]
        );
        assert_eq!(rows[0].process.ppid, 1);
    }

    #[test]
    fn root_whose_parent_is_a_descendant_still_comes_first() {
        let processes = [p(100, 200, 100), p(200, 100, 200)];
        assert_eq!(
            shape(&build_tree(100, &processes, Some(200))),
            [(0, 100, false), (1, 200, false)]
        );
    }

    #[test]
    fn absent_root_gives_no_rows_and_deep_chains_do_not_overflow() {
        assert!(build_tree(7, &[p(100, 1, 100)], None).is_empty());
        let mut chain = vec![p(1, 0, 1)];
        chain.extend((2..20_000).map(|pid| p(pid, pid - 1, 1)));
        let rows = build_tree(1, &chain, Some(1));
        assert_eq!(rows.len(), chain.len());
        assert_eq!(rows.last().map(|r| r.depth), Some(19_998));
    }
}
