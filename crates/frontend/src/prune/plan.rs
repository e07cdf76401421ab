//! Which sessions to remove, given what is known of each and the rules: a pure decision,
//! with no file system and no clock of its own, so every case is a plain unit test.

use tether_protocol::units::format_size;

pub use tether_config::user::Rules;

/// Whether a session may be removed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Liveness {
    /// Nothing runs in it: it may go.
    Finished,
    /// Something runs in it, or tether cannot tell that nothing does: it stays. The text
    /// says why (`broker 1234 of 01-sleep runs`).
    Live(String),
}

/// What is known of one session when deciding.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Candidate {
    pub id: String,
    /// When it started (the order sessions go in: oldest first), ms since the epoch.
    pub started_ms: u64,
    /// When anything in it last changed, ms since the epoch: when it ended, for a finished one.
    pub ended_ms: u64,
    pub size: u64,
    pub liveness: Liveness,
}

/// The decision: indexes into the candidates given to [`plan`].
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Plan {
    /// To remove, oldest first.
    pub remove: Vec<usize>,
    /// Live sessions a rule would have removed, oldest first.
    pub kept_live: Vec<usize>,
    /// Rules that still do not hold once everything removable is gone, said for people.
    pub unmet: Vec<String>,
}

/// Removes sessions oldest first until every rule holds: first every session that ended
/// before `now_ms - older_than`, then the oldest until at most `keep` are left, then the
/// oldest until the total size is at most `max_size`. A live session is never removed, and
/// neither is `protect` (the session that just ended, when retention runs at its end).
pub fn plan(candidates: &[Candidate], rules: &Rules, now_ms: u64, protect: Option<&str>) -> Plan {
    let mut order: Vec<usize> = (0..candidates.len()).collect();
    order.sort_by_key(|&i| (candidates[i].started_ms, &candidates[i].id));
    let removable =
        |c: &Candidate| c.liveness == Liveness::Finished && protect != Some(c.id.as_str());
    let mut removed = vec![false; candidates.len()];
    let mut blocked = vec![false; candidates.len()];
    let mut take = |i: usize, removed: &mut Vec<bool>| {
        if removable(&candidates[i]) {
            removed[i] = true;
            true
        } else {
            blocked[i] = true;
            false
        }
    };

    if let Some(age) = rules.older_than {
        let cutoff = now_ms.saturating_sub(u64::try_from(age.as_millis()).unwrap_or(u64::MAX));
        for &i in &order {
            if candidates[i].ended_ms < cutoff {
                take(i, &mut removed);
            }
        }
    }
    let mut left = removed.iter().filter(|r| !**r).count();
    if let Some(keep) = rules.keep {
        for &i in &order {
            if left <= keep {
                break;
            }
            if !removed[i] && take(i, &mut removed) {
                left -= 1;
            }
        }
    }
    let mut total: u64 = (0..candidates.len())
        .filter(|&i| !removed[i])
        .map(|i| candidates[i].size)
        .sum();
    if let Some(max) = rules.max_size {
        for &i in &order {
            if total <= max {
                break;
            }
            if !removed[i] && take(i, &mut removed) {
                total -= candidates[i].size;
            }
        }
    }

    let mut unmet = Vec::new();
    if let Some(keep) = rules.keep.filter(|&keep| left > keep) {
        unmet.push(format!(
            "keep {keep}: {left} sessions are left, the others being live or just ended"
        ));
    }
    if let Some(max) = rules.max_size.filter(|&max| total > max) {
        unmet.push(format!(
            "max size {}: {} is left, held by live sessions or the one that just ended",
            format_size(max),
            format_size(total)
        ));
    }
    Plan {
        remove: order.iter().copied().filter(|&i| removed[i]).collect(),
        kept_live: order
            .iter()
            .copied()
            .filter(|&i| blocked[i] && !removed[i])
            .collect(),
        unmet,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    const DAY: u64 = 86_400_000;
    const NOW: u64 = 100 * DAY;

    /// Sessions `s0`, `s1`, ... started a day apart and each ended an hour after it started.
    fn sessions(sizes: &[u64]) -> Vec<Candidate> {
        sizes
            .iter()
            .enumerate()
            .map(|(i, &size)| Candidate {
                id: format!("s{i}"),
                started_ms: NOW - (sizes.len() - i) as u64 * DAY,
                ended_ms: NOW - (sizes.len() - i) as u64 * DAY + 3_600_000,
                size,
                liveness: Liveness::Finished,
            })
            .collect()
    }

    fn ids(candidates: &[Candidate], indexes: &[usize]) -> Vec<String> {
        indexes.iter().map(|&i| candidates[i].id.clone()).collect()
    }

    fn removed(candidates: &[Candidate], rules: Rules, protect: Option<&str>) -> Vec<String> {
        ids(candidates, &plan(candidates, &rules, NOW, protect).remove)
    }

    #[test]
    fn no_rule_removes_nothing() {
        let all = sessions(&[10, 20, 30]);
        assert!(Rules::default().is_empty());
        assert_eq!(plan(&all, &Rules::default(), NOW, None), Plan::default());
    }

    #[test]
    fn older_than_removes_what_ended_before_the_cutoff() {
        // Ended 4d23h, 3d23h, 2d23h, 1d23h and 23h ago.
        let all = sessions(&[1, 1, 1, 1, 1]);
        let rules = Rules {
            older_than: Some(Duration::from_millis(3 * DAY)),
            ..Rules::default()
        };
        assert_eq!(removed(&all, rules, None), ["s0", "s1"]);
    }

    #[test]
    fn keep_removes_the_oldest_and_counts_live_sessions() {
        let mut all = sessions(&[1, 1, 1, 1, 1]);
        let keep = |n| Rules {
            keep: Some(n),
            ..Rules::default()
        };
        assert_eq!(removed(&all, keep(2), None), ["s0", "s1", "s2"]);
        assert_eq!(removed(&all, keep(5), None), Vec::<String>::new());
        assert_eq!(removed(&all, keep(0), None).len(), 5);
        // The oldest is live: it stays, counts, and the next ones go instead.
        all[0].liveness = Liveness::Live("broker 7 runs".into());
        let decided = plan(&all, &keep(2), NOW, None);
        assert_eq!(ids(&all, &decided.remove), ["s1", "s2", "s3"]);
        assert_eq!(ids(&all, &decided.kept_live), ["s0"]);
        assert!(decided.unmet.is_empty());
    }

    #[test]
    fn max_size_removes_the_oldest_until_the_total_fits() {
        let all = sessions(&[100, 200, 300, 400]);
        let max = |n| Rules {
            max_size: Some(n),
            ..Rules::default()
        };
        assert_eq!(removed(&all, max(1000), None), Vec::<String>::new());
        assert_eq!(removed(&all, max(999), None), ["s0"]);
        assert_eq!(removed(&all, max(700), None), ["s0", "s1"]);
        assert_eq!(removed(&all, max(0), None).len(), 4);
        let freed: u64 = (plan(&all, &max(700), NOW, None).remove.iter())
            .map(|&i| all[i].size)
            .sum();
        assert_eq!(freed, 300);
    }

    #[test]
    fn live_and_protected_sessions_stay_whatever_the_rules() {
        let mut all = sessions(&[500, 500, 500]);
        all[1].liveness = Liveness::Live("cannot tell".into());
        let rules = Rules {
            older_than: Some(Duration::ZERO),
            keep: Some(0),
            max_size: Some(0),
        };
        let decided = plan(&all, &rules, NOW, Some("s2"));
        assert_eq!(ids(&all, &decided.remove), ["s0"]);
        assert_eq!(ids(&all, &decided.kept_live), ["s1", "s2"]);
        assert_eq!(decided.unmet.len(), 2, "{:?}", decided.unmet);
        assert!(decided.unmet[0].contains("2 sessions are left"));
        assert!(decided.unmet[1].contains("1000 B is left"));
    }

    #[test]
    fn rules_combine_and_order_goes_by_start_not_by_input_order() {
        let mut all = sessions(&[100, 100, 100, 100]);
        all.reverse();
        let rules = Rules {
            older_than: Some(Duration::from_millis(3 * DAY)),
            keep: Some(2),
            ..Rules::default()
        };
        // s0 by age, then s1 by count.
        assert_eq!(removed(&all, rules, None), ["s0", "s1"]);
        assert_eq!(
            rules.describe(),
            "older than 3d00h, keep 2",
            "the rules said for people"
        );
    }
}
