//! The dependency graph of a launcher's commands: a cycle, and the order in which a set of
//! commands stops when what depends on something stops before it.

/// A cycle among `depends_on`, as the indices along it with the first repeated at the end
/// (`a → b → a`), or `None`. `depends_on[i]` lists what command `i` depends on.
pub fn find_cycle(depends_on: &[Vec<usize>]) -> Option<Vec<usize>> {
    #[derive(Clone, Copy, PartialEq)]
    enum Mark {
        New,
        OnPath,
        Done,
    }
    fn visit(
        i: usize,
        depends_on: &[Vec<usize>],
        marks: &mut [Mark],
        path: &mut Vec<usize>,
    ) -> Option<Vec<usize>> {
        marks[i] = Mark::OnPath;
        path.push(i);
        let count = marks.len();
        for &next in depends_on[i].iter().filter(|&&n| n < count) {
            match marks[next] {
                Mark::OnPath => {
                    let from = path.iter().position(|&p| p == next).unwrap_or(0);
                    let mut cycle = path[from..].to_vec();
                    cycle.push(next);
                    return Some(cycle);
                }
                Mark::New => {
                    if let Some(cycle) = visit(next, depends_on, marks, path) {
                        return Some(cycle);
                    }
                }
                Mark::Done => {}
            }
        }
        path.pop();
        marks[i] = Mark::Done;
        None
    }
    let mut marks = vec![Mark::New; depends_on.len()];
    (0..depends_on.len()).find_map(|i| {
        (marks[i] == Mark::New)
            .then(|| visit(i, depends_on, &mut marks, &mut Vec::new()))
            .flatten()
    })
}

/// `i` and every command that depends on it, directly or not.
pub fn with_dependents(i: usize, depends_on: &[Vec<usize>]) -> Vec<usize> {
    let mut found = vec![i];
    let mut next = 0;
    while next < found.len() {
        let of = found[next];
        for (d, deps) in depends_on.iter().enumerate() {
            if deps.contains(&of) && !found.contains(&d) {
                found.push(d);
            }
        }
        next += 1;
    }
    found
}
