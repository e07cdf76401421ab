//! What legitimately differs between two runs of the same script, and nothing else.

use std::path::Path;
use std::sync::LazyLock;

use regex::Regex;

static MASKS: LazyLock<Vec<(Regex, &'static str)>> = LazyLock::new(|| {
    [
        // Where an agent saved a large output (Claude Code, Gemini CLI): a fresh file each run.
        (r"(saved to|full output see): \S+", "$1: <file>"),
        // Gemini CLI in a terminal: how much of a large output it leaves out varies from run
        // to run, bare too (it reads the terminal as it renders).
        (r"\[[\d,]+ characters omitted\]", "[<n> characters omitted]"),
        // Gemini CLI: the process group and background pids of each call.
        (r"Process Group PGID: \d+", "Process Group PGID: <pgid>"),
        (r"Background PIDs: [\d, ]+", "Background PIDs: <pids>"),
        // Codex: a random id and the wall time of each result, the id of a running process.
        (r"Chunk ID: \w+", "Chunk ID: <id>"),
        (r"Wall time: [\d.]+ seconds", "Wall time: <t> seconds"),
        (r"session ID \d+", "session ID <id>"),
        // Claude Code: a background task's id and its output file.
        (r"with ID: \w+", "with ID: <id>"),
        (r"written to: \S+", "written to: <file>"),
    ]
    .into_iter()
    .map(|(re, to)| (Regex::new(re).expect("a mask"), to))
    .collect()
});

/// How the agent reads a command's output.
#[derive(Debug, Clone, Copy)]
pub struct Reading {
    /// stdout and stderr on two pipes (Codex; Gemini CLI with `-p`).
    pub two_pipes: bool,
    /// A terminal of its own, read back through a terminal emulator (Gemini CLI in a
    /// terminal): what it keeps of a large output past the part it cuts out differs from run
    /// to run, bare too (lines lost or run together at the end).
    pub through_terminal_emulator: bool,
}

/// A large output past the marker of what was left out, to the agent's own framing.
static RENDERED_TAIL: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"(?s)(\.\.\. \[<n> characters omitted\] \.\.\.).*?(\nProcess Group PGID|$)")
        .expect("a regex")
});

/// What legitimately differs between two runs of the same script, made equal; everything
/// else an agent sent back must match byte for byte:
/// - the run's own directory (its HOME and working directory), also in the dashed form
///   Claude Code gives its project directories;
/// - the ports of the script's servers (`ports`), chosen free for each run;
/// - pids, process groups, and the ids, file names and times an agent makes up per call
///   ([`MASKS`]);
/// - where the agent reads a command through a terminal emulator, what it kept of a large
///   output past the part it left out, and whether it told the background pids
///   ([`Reading`]);
/// - when the agent reads a command's stdout and stderr on two pipes (`two_pipes`: Codex;
///   Gemini CLI with `-p`), how the lines of the two interleave, which bash does not fix
///   either (Codex's bare runs differ from each other): there, each stream's lines keep their
///   order ([`streams_apart`]). Where the command has one file or terminal for both (Claude
///   Code; Gemini CLI in a terminal), its order is compared as it is.
pub fn mask(reading: Reading, run_dir: &Path, ports: &[u16], text: &str) -> String {
    let dir = run_dir.to_string_lossy().into_owned();
    let dashed = dir.replace(['/', '.'], "-");
    let mut text = text.replace(&dir, "<run>").replace(&dashed, "<run>");
    for port in ports {
        text = text.replace(&format!("127.0.0.1:{port}"), "127.0.0.1:<port>");
    }
    for (re, to) in MASKS.iter() {
        text = re.replace_all(&text, *to).into_owned();
    }
    // The shell's name in `$0` and its messages: bare, the agent's own lookup (`$SHELL`,
    // `/bin/bash` here, for Claude Code; the first `bash` on PATH, `/usr/bin/bash`, for Gemini
    // CLI); under tether, the path the shim runs it from (`/bin/bash`): one file on a merged
    // /usr (docs/agents.md). A path of tether's would still differ.
    text = text.replace("/usr/bin/bash", "/bin/bash");
    // Where a large output's kept tail begins depends on the length of what follows it in
    // the agent's own text: Gemini CLI keeps the last 32,000 characters of the output and its
    // `Process Group PGID: N` line, so a pid with one digit more moves the cut. The line the
    // cut falls in is masked; [`same_but_where_the_tail_was_cut`] allows the few whole lines
    // such a shift moves.
    text = TAIL_CUT.replace_all(&text, "$1<cut>\n").into_owned();
    // A call whose process group was sent TERM (the runaway), in Gemini CLI's wrapper: its
    // subshell either reaps the killed `sleep` first and says `Terminated`, or dies first and
    // its EXIT trap names the job not yet reaped as a background pid. Which comes first is
    // bash's race, bare too: 60 bare runs of the wrapper here all gave the second, one bare
    // run in the suite on a loaded machine the first.
    if text.contains("\nSignal: 15\n") {
        text = text.replace("Output: Terminated\n", "Output: (empty)\n");
        text = BACKGROUND_PIDS.replace_all(&text, "").into_owned();
    }
    if reading.two_pipes {
        text = streams_apart(&text);
    }
    if reading.through_terminal_emulator {
        text = RENDERED_TAIL
            .replace_all(&text, "$1 <the rest as rendered>$2")
            .into_owned();
        // Whether it tells the background pids its wrapper wrote to a file (`jobs -p` in an
        // EXIT trap) varies from run to run there, bare too: a `&` server's step read
        // `Background PIDs: …` in one bare run and not in the next.
        text = BACKGROUND_PIDS.replace_all(&text, "").into_owned();
    }
    text
}

/// The first line of a large output's kept tail, which begins where the agent's cut fell.
static TAIL_CUT: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"(\.\.\. \[<n> characters omitted\] \.\.\.\n\n)[^\n]*\n").expect("a regex")
});

/// How many whole lines a kept tail may begin earlier in one run than in the other: the
/// agent's framing after the output differs by a few characters (a longer pid), which moves
/// the cut by at most a short line or two.
const CUT_SHIFT_LINES: usize = 3;

/// Whether two masked tool results differ only in where a large output's kept tail begins:
/// the same text up to the cut, and after it one tail is the other with at most
/// [`CUT_SHIFT_LINES`] more lines at its start. Every line both kept is compared.
pub fn same_but_where_the_tail_was_cut(a: &str, b: &str) -> bool {
    const MARK: &str = "... [<n> characters omitted] ...\n\n<cut>\n";
    let (Some(at_a), Some(at_b)) = (a.find(MARK), b.find(MARK)) else {
        return false;
    };
    let (head_a, tail_a) = a.split_at(at_a + MARK.len());
    let (head_b, tail_b) = b.split_at(at_b + MARK.len());
    let (shorter, longer) = if tail_a.len() <= tail_b.len() {
        (tail_a, tail_b)
    } else {
        (tail_b, tail_a)
    };
    let extra = &longer[..longer.len() - shorter.len()];
    head_a == head_b
        && longer.ends_with(shorter)
        && (extra.is_empty() || extra.ends_with('\n'))
        && extra.matches('\n').count() <= CUT_SHIFT_LINES
}

/// Gemini CLI's line of a call's background pids, once masked.
static BACKGROUND_PIDS: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"(?m)^Background PIDs: <pids>\n").expect("a regex"));

/// The interleaved step's lines (`outN`, `errN`, maybe behind the agent's own prefix such
/// as `Output: `) rebuilt as all of stdout's, then all of stderr's, each in its own order, where
/// the first of them was.
pub fn streams_apart(text: &str) -> String {
    static LINE: LazyLock<Regex> =
        LazyLock::new(|| Regex::new(r"^(.*?)((out|err)\d+)$").expect("a regex"));
    let mut first = None;
    let (mut out, mut err, mut rest) = (Vec::new(), Vec::new(), Vec::new());
    for line in text.split('\n') {
        match LINE.captures(line) {
            Some(c) => {
                if first.is_none() {
                    first = Some((rest.len(), c[1].to_string()));
                }
                let which = if &c[3] == "out" { &mut out } else { &mut err };
                which.push(c[2].to_string());
            }
            None => rest.push(line.to_string()),
        }
    }
    let Some((at, prefix)) = first else {
        return text.to_string();
    };
    let mut streams: Vec<String> = out.into_iter().chain(err).collect();
    streams[0] = format!("{prefix}{}", streams[0]);
    rest.splice(at..at, streams);
    rest.join("\n")
}
