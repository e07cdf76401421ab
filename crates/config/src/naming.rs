//! A command's name when the operator gives none: the first program it runs, as a reader of
//! the command line would name it. `sh -c 'cd /tmp && FOO=1 exec nice make -j2'` is `make`,
//! not `cd`; two commands that run `echo` are `echo` and `echo-2`.
//!
//! This reads a shell command well enough to name it, no more: words, quotes, separators and
//! redirections. Whatever it cannot make sense of falls back to the first word, so a name is
//! never empty.

use thiserror::Error;

use tether_protocol::protocol::CommandSpec;

/// Shell keywords that start or continue a compound command: the program comes after them.
const KEYWORDS: [&str; 11] = [
    "while", "until", "if", "then", "do", "else", "elif", "!", "{", "}", "fi",
];
/// Compound commands whose own words are not programs (`for x in a b`): skipped whole.
const HEADERS: [&str; 3] = ["for", "select", "case"];
/// Words that end a compound command; nothing follows them in the same simple command.
const CLOSERS: [&str; 2] = ["done", "esac"];
/// Builtins that prepare or test rather than do: a command that runs something after them is
/// named by that something (`cd dir && make`, `trap '' TERM; yes`, `[ -f x ] && make`,
/// `cd dir || exit 1; make`).
const PREPARATIONS: [&str; 29] = [
    "cd", "pushd", "popd", ":", "true", "false", "export", "set", "unset", "trap", "umask",
    "ulimit", "shopt", "source", ".", "local", "readonly", "declare", "typeset", "alias", "[",
    "[[", "test", "exit", "return", "break", "continue", "shift", "wait",
];
/// Builtins that do nothing but succeed or fail. A loop that runs nothing else (`while :;
/// do :; done`, `while [ 1 ]; do :; done`: a busy loop) is named by its loop keyword.
const NO_OPS: [&str; 6] = [":", "true", "false", "[", "[[", "test"];
/// Keywords that start a loop.
const LOOPS: [&str; 4] = ["while", "until", "for", "select"];
/// Shells whose `-c` string is itself read for a name.
const SHELLS: [&str; 6] = ["sh", "bash", "zsh", "dash", "ksh", "ash"];

/// How a name could not be given.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum NamingError {
    #[error(
        "-n was given {names} time{} for {commands} commands: give one -n per command, in the \
         order the commands are given (each -c, then the command after --), or none",
        if *names == 1 { "" } else { "s" }
    )]
    Ambiguous { names: usize, commands: usize },
    #[error("two commands are named `{0}`: give each command its own name")]
    Duplicate(String),
    #[error("-n: a command's name cannot be empty")]
    Empty,
}

/// The name of a command: the first program it runs, by its file name.
pub fn derive_name(command: &CommandSpec) -> String {
    match command {
        CommandSpec::Shell(script) => shell_program(script).unwrap_or_else(|| "sh".into()),
        CommandSpec::Argv(argv) => {
            let argv = agent_argv(argv).unwrap_or(argv);
            let words: Vec<Word> = argv.iter().map(|a| Word::plain(a)).collect();
            match program_of(&words) {
                Found::Program(name) | Found::Preparation(name) => name,
                Found::Nothing => "command".into(),
            }
        }
    }
}

/// A command as one line for the operator: a shell script as its lines joined by ` ⏎ `, a
/// shell's `-c` script (as agents call it, and as the shim journals it) as that script, an
/// agent's wrapper as what it runs ([`agent_command`]), any other argv shell-quoted. The
/// list, the post-mortem, exports and notifications all say it this way.
pub fn command_text(command: &CommandSpec) -> String {
    let script_lines = |script: &str| {
        script
            .lines()
            .map(str::trim)
            .filter(|line| !line.is_empty())
            .collect::<Vec<_>>()
            .join(" ⏎ ")
    };
    match command {
        CommandSpec::Shell(script) => script_lines(script),
        CommandSpec::Argv(argv) => match dash_c_script(argv) {
            Some(script) => match (snapshot_file(script), agent_command(script)) {
                // Sixty lines of Claude Code's own, the same every run: where it writes says it.
                (Some(file), _) => {
                    format!("SNAPSHOT_FILE={file} … (writes the agent's shell snapshot)")
                }
                // An agent's wrapper is the same every call: what it runs is what tells.
                (None, Some(asked)) => script_lines(&cd_folded(&asked)),
                (None, None) => script_lines(script),
            },
            None => agent_argv(argv)
                .unwrap_or(argv)
                .iter()
                .map(|word| shell_quoted(word))
                .collect::<Vec<_>>()
                .join(" "),
        },
    }
}

/// Whether `command` is one of an agent's own set-up shells rather than a command it was
/// asked to run. Claude Code (2.1.197, as recorded under `tether agent`) runs two before its
/// first tool call: `/bin/bash -c env` (it reads the login environment) and `/bin/bash -c -l
/// 'SNAPSHOT_FILE=~/.claude/shell-snapshots/snapshot-bash-….sh …'` (the script that writes
/// the shell snapshot each later command sources).
pub fn is_agent_setup(command: &CommandSpec) -> bool {
    let script = match command {
        CommandSpec::Shell(script) => script.as_str(),
        CommandSpec::Argv(argv) => match dash_c_script(argv) {
            Some(script) => script,
            None => return false,
        },
    };
    script.trim() == "env" || snapshot_file(script).is_some()
}

/// The file Claude Code's snapshot script writes, where `script` is one
/// (`SNAPSHOT_FILE=…/shell-snapshots/….sh` and the script that fills it).
fn snapshot_file(script: &str) -> Option<&str> {
    script
        .trim_start()
        .strip_prefix("SNAPSHOT_FILE=")
        .and_then(|rest| rest.split_whitespace().next())
        .filter(|file| file.contains("/shell-snapshots/"))
}

/// The agent's own argv where `tether agent` journals it as `tether session-owner --shims DIR
/// -- AGENT ARGS...` (the step that sets up its shims, then becomes it): what the operator
/// started is `AGENT ARGS...`.
pub fn agent_argv(argv: &[String]) -> Option<&[String]> {
    let tether = argv.first()?.rsplit('/').next()? == "tether";
    let owner = argv.get(1)? == tether_protocol::names::OWNER_SUBCOMMAND;
    let dashes = argv.iter().position(|a| a == "--")?;
    (tether && owner)
        .then(|| &argv[dashes + 1..])
        .filter(|rest| !rest.is_empty())
}

/// The script of a shell run as `SHELL [-l] -c SCRIPT` (as agents call it, and as the shim
/// journals it), where nothing follows the script but maybe a shell's own name as `$0` (`bash
/// -c SCRIPT /bin/bash`, as Codex's commands reach the shim); `None` for any other argv.
fn dash_c_script(argv: &[String]) -> Option<&str> {
    const SHELLS: [&str; 5] = ["sh", "bash", "zsh", "dash", "ksh"];
    let is_shell = |word: &str| {
        word.rsplit('/')
            .next()
            .is_some_and(|name| SHELLS.contains(&name))
    };
    if !is_shell(argv.first()?) {
        return None;
    }
    let c = argv[1..].iter().position(|a| {
        a.starts_with('-') && a.contains('c') && a.chars().skip(1).all(|ch| ch == 'c' || ch == 'l')
    })?;
    // `-l` may come before `-c` or after it (`bash -c -l SCRIPT`, as Claude Code runs it).
    let login = |a: &String| a == "-l" || a == "--login";
    let flags_ok = argv[1..1 + c].iter().all(login);
    let rest: Vec<&String> = argv[2 + c..].iter().skip_while(|a| login(a)).collect();
    let only_zero = match rest.as_slice() {
        [_] => true,
        [_, zero] => is_shell(zero),
        _ => false,
    };
    (flags_ok && only_zero).then(|| rest[0].as_str())
}

/// `word`, in single quotes if a shell would read it as more than one plain word.
pub fn shell_quoted(word: &str) -> String {
    let plain = !word.is_empty()
        && word
            .chars()
            .all(|c| c.is_alphanumeric() || "-_./=:,+@%^".contains(c));
    if plain {
        word.to_string()
    } else {
        format!("'{}'", word.replace('\'', "'\\''"))
    }
}

/// The command an agent's wrapper runs: Claude Code's Bash tool sends (2.1.197, as recorded)
/// `source SNAPSHOT 2>/dev/null || true && shopt -u extglob 2>/dev/null || true && eval 'CMD'
/// < /dev/null && pwd -P >| FILE` (the `source` part only once it has a shell snapshot; `CMD`
/// unquoted when it is one plain word), and what the operator wants to read is `CMD`. `None` for any other script.
pub fn agent_command(script: &str) -> Option<String> {
    if let Some(command) = gemini_command(script) {
        return Some(command);
    }
    let script = script.trim_start();
    let script = snapshot_sourced(script).unwrap_or(script);
    let rest = script.strip_prefix("shopt -u extglob 2>/dev/null || true && eval ")?;
    let (word, after) = split_word(rest);
    let after = after.trim_start();
    // What may follow the command: `< /dev/null`, then `&& pwd -P >| FILE` (either may be
    // missing, as earlier versions sent), and nothing else, so that a script that only
    // begins as the wrapper does is not taken for one. A command of one plain word comes
    // unquoted (`eval true < /dev/null`), as a shell quoter leaves it; unquoted, `< /dev/null`
    // must be there, so that a script ending `eval ls` is not taken for one either.
    let stdin_closed = after.strip_prefix("< /dev/null").map(str::trim_start);
    let tail = stdin_closed.unwrap_or(after);
    let cwd_written = |tail: &str| {
        let Some(file) = tail.strip_prefix("&& pwd -P >| ") else {
            return false;
        };
        let (file, end) = split_word(file);
        !file.text.is_empty() && end.trim().is_empty()
    };
    let whole = (tail.is_empty() || cwd_written(tail))
        && (word.quoted || (stdin_closed.is_some() && shell_quoted(&word.text) == word.text));
    whole.then_some(word.text)
}

/// The command Gemini CLI's wrapper runs. 0.61 sends (as recorded):
///
/// ```text
/// shopt -u promptvars nullglob extglob nocaseglob dotglob; _bgpids_file=/tmp/gemini-shell-X/bgpids.tmp
/// (
///   trap 'jobs -p > "$_bgpids_file"' EXIT
/// CMD
/// )
/// __code=$?
/// exit $__code
/// ```
///
/// and earlier versions the same on one line (`( trap '…' EXIT; CMD ); __code=$?; exit
/// $__code`). `None` for any other script.
fn gemini_command(script: &str) -> Option<String> {
    let script = script.trim();
    if !script.starts_with("shopt -u promptvars") {
        return None;
    }
    let end = |text: &str| text.trim_end().trim_end_matches(';').trim_end().to_string();
    let body = end(script.strip_suffix("exit $__code")?);
    let body = end(body.strip_suffix("__code=$?")?);
    let body = body.strip_suffix(')')?;
    let (_, after_trap) = body.split_once("' EXIT")?;
    let command = after_trap
        .trim_start_matches(|c: char| c == ';' || c.is_whitespace())
        .trim_end();
    (!command.is_empty()).then(|| command.to_string())
}

/// `cd DIR && REST`, the form agents give a command in another directory, as `REST (cd
/// DIR)`: what it runs first, where it runs second. Anything else as it is.
fn cd_folded(command: &str) -> String {
    let folded = || {
        let (dir, rest) = split_word(command.trim_start().strip_prefix("cd ")?);
        let then = rest.trim_start().strip_prefix("&&")?.trim_start();
        (!then.is_empty() && !dir.text.is_empty() && !then.contains('\n'))
            .then(|| format!("{then} (cd {})", dir.text))
    };
    folded().unwrap_or_else(|| command.to_string())
}

/// What follows Claude Code's `source SNAPSHOT 2>/dev/null || true && ` at the start of
/// `script`, if it starts so.
fn snapshot_sourced(script: &str) -> Option<&str> {
    let (_, rest) = split_word(script.strip_prefix("source ")?);
    rest.trim_start().strip_prefix("2>/dev/null || true && ")
}

/// The first program a shell command runs (`cd /tmp && ls` → `ls`); `None` when it holds no
/// word at all. An agent's wrapper is named by what it runs ([`agent_command`]), never by its
/// own builtins (Gemini CLI's `shopt`, where the command is `true` or a busy loop).
pub fn shell_program(script: &str) -> Option<String> {
    if let Some(asked) = gemini_command(script) {
        return shell_program(&asked);
    }
    let tokens = tokenize(script);
    let mut fallback = None;
    let mut looped = None;
    for words in simple_commands(&tokens) {
        looped =
            looped.or_else(|| (words.first()).and_then(|w| LOOPS.into_iter().find(|k| w.is(k))));
        match program_of(&words) {
            Found::Program(name) => return Some(name),
            Found::Preparation(name) => {
                fallback.get_or_insert(name);
            }
            Found::Nothing => {}
        }
    }
    match (fallback, looped) {
        (Some(name), Some(keyword)) if NO_OPS.contains(&name.as_str()) => Some(keyword.into()),
        (fallback, _) => fallback,
    }
}

/// Names for commands given on the command line: `given` (from `-n`, in order) when there is
/// one per command, else each command's derived name, made unique with a suffix
/// (`echo`, `echo-2`).
pub fn assign_names(
    commands: &[CommandSpec],
    given: &[String],
) -> Result<Vec<String>, NamingError> {
    if given.is_empty() {
        let mut names: Vec<String> = Vec::with_capacity(commands.len());
        for command in commands {
            let name = unique_name(&derive_name(command), |n| names.iter().any(|t| t == n));
            names.push(name);
        }
        return Ok(names);
    }
    if given.len() != commands.len() {
        return Err(NamingError::Ambiguous {
            names: given.len(),
            commands: commands.len(),
        });
    }
    for (i, name) in given.iter().enumerate() {
        if name.trim().is_empty() {
            return Err(NamingError::Empty);
        }
        if given[..i].contains(name) {
            return Err(NamingError::Duplicate(name.clone()));
        }
    }
    Ok(given.to_vec())
}

/// `base`, or `base-2`, `base-3`, ... : the first that `taken` does not hold.
pub fn unique_name(base: &str, taken: impl Fn(&str) -> bool) -> String {
    if !taken(base) {
        return base.to_string();
    }
    (2..)
        .map(|n| format!("{base}-{n}"))
        .find(|candidate| !taken(candidate))
        .unwrap_or_else(|| base.to_string())
}

// ---- reading a shell command ----------------------------------------------------------

#[derive(Debug, Clone, PartialEq)]
enum Token {
    Word(Word),
    /// `;`, `&&`, `||`, `|`, `&`, a newline, `(` or `)`: where a simple command ends.
    Separator,
    /// `(` right after a word: a function definition `name() { ... }`.
    OpenParen,
    /// `>`, `2>&1`, `<<`: the word after it (unless the operator holds it) is a file.
    Redirect {
        takes_word: bool,
    },
}

#[derive(Debug, Clone, PartialEq)]
struct Word {
    text: String,
    /// Written with quotes or escapes: never a keyword (`'if'` is a program).
    quoted: bool,
}

impl Word {
    fn plain(text: &str) -> Word {
        Word {
            text: text.to_string(),
            quoted: true,
        }
    }

    fn is(&self, keyword: &str) -> bool {
        !self.quoted && self.text == keyword
    }

    fn is_any(&self, words: &[&str]) -> bool {
        words.iter().any(|w| self.is(w))
    }
}

fn tokenize(script: &str) -> Vec<Token> {
    let chars: Vec<char> = script.chars().collect();
    let mut tokens = Vec::new();
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        match c {
            ' ' | '\t' => i += 1,
            '\n' | ';' | '&' | '|' | ')' => {
                tokens.push(Token::Separator);
                i += 1;
            }
            '(' => {
                let after_word = matches!(tokens.last(), Some(Token::Word(_)))
                    && i > 0
                    && !chars[i - 1].is_whitespace();
                tokens.push(if after_word {
                    Token::OpenParen
                } else {
                    Token::Separator
                });
                i += 1;
            }
            '#' => {
                while i < chars.len() && chars[i] != '\n' {
                    i += 1;
                }
            }
            '<' | '>' => i = redirect(&chars, i, &mut tokens),
            _ => {
                let (word, next) = read_word(&chars, i);
                i = next;
                // `2>file`: a word of digits right before `<` or `>` is a descriptor.
                let descriptor = word.text.chars().all(|c| c.is_ascii_digit())
                    && !word.quoted
                    && matches!(chars.get(i), Some('<' | '>'));
                if !descriptor {
                    tokens.push(Token::Word(word));
                }
            }
        }
    }
    tokens
}

/// Reads a redirection operator at `i` (`>`, `>>`, `>|`, `<`, `<<`, `<<<`, `>&2`, `<&-`,
/// `&>`); returns where the text after it starts.
fn redirect(chars: &[char], mut i: usize, tokens: &mut Vec<Token>) -> usize {
    while i < chars.len() && matches!(chars[i], '<' | '>' | '|') {
        i += 1;
    }
    if chars.get(i) == Some(&'&') {
        i += 1;
        let start = i;
        while i < chars.len() && (chars[i].is_ascii_digit() || chars[i] == '-') {
            i += 1;
        }
        if i > start {
            tokens.push(Token::Redirect { takes_word: false });
            return i;
        }
    }
    tokens.push(Token::Redirect { takes_word: true });
    i
}

/// The word `text` starts with, and the text after it.
fn split_word(text: &str) -> (Word, &str) {
    let chars: Vec<char> = text.chars().collect();
    let (word, end) = read_word(&chars, 0);
    let consumed: usize = chars[..end].iter().map(|c| c.len_utf8()).sum();
    (word, &text[consumed..])
}

/// One word from `start`: quotes and escapes resolved, `$(...)` and backquotes kept whole.
fn read_word(chars: &[char], start: usize) -> (Word, usize) {
    let mut text = String::new();
    let mut quoted = false;
    let mut i = start;
    while i < chars.len() {
        let c = chars[i];
        match c {
            ' ' | '\t' | '\n' | ';' | '&' | '|' | '<' | '>' | '(' | ')' => break,
            '\\' => {
                quoted = true;
                if let Some(&next) = chars.get(i + 1)
                    && next != '\n'
                {
                    text.push(next);
                }
                i += 2;
            }
            '\'' => {
                quoted = true;
                i += 1;
                while i < chars.len() && chars[i] != '\'' {
                    text.push(chars[i]);
                    i += 1;
                }
                i += 1;
            }
            '"' => {
                quoted = true;
                i += 1;
                while i < chars.len() && chars[i] != '"' {
                    if chars[i] == '\\' && matches!(chars.get(i + 1), Some('"' | '\\' | '$' | '`'))
                    {
                        i += 1;
                    }
                    if let Some(&c) = chars.get(i) {
                        text.push(c);
                    }
                    i += 1;
                }
                i += 1;
            }
            '$' if chars.get(i + 1) == Some(&'(') => {
                let mut depth = 0;
                while i < chars.len() {
                    match chars[i] {
                        '(' => depth += 1,
                        ')' => {
                            depth -= 1;
                            if depth == 0 {
                                text.push(')');
                                i += 1;
                                break;
                            }
                        }
                        _ => {}
                    }
                    text.push(chars[i]);
                    i += 1;
                }
            }
            '`' => {
                text.push('`');
                i += 1;
                while i < chars.len() && chars[i] != '`' {
                    text.push(chars[i]);
                    i += 1;
                }
                text.push('`');
                i += 1;
            }
            _ => {
                text.push(c);
                i += 1;
            }
        }
    }
    (Word { text, quoted }, i.min(chars.len()))
}

/// The words of each simple command, in order, without redirections and their files, and
/// without function definitions (`worker() { ... }` runs nothing where it stands).
fn simple_commands(tokens: &[Token]) -> Vec<Vec<Word>> {
    let mut commands = Vec::new();
    let mut current: Vec<Word> = Vec::new();
    let mut i = 0;
    while i < tokens.len() {
        match &tokens[i] {
            Token::Word(word) => current.push(word.clone()),
            Token::Redirect { takes_word } => {
                if *takes_word && matches!(tokens.get(i + 1), Some(Token::Word(_))) {
                    i += 1;
                }
            }
            Token::OpenParen => {
                current.pop();
                i = skip_function_body(tokens, i + 1);
                continue;
            }
            Token::Separator => {
                if !current.is_empty() {
                    commands.push(std::mem::take(&mut current));
                }
            }
        }
        i += 1;
    }
    if !current.is_empty() {
        commands.push(current);
    }
    commands
}

/// From just after `name(`, the index after the function's body: its `)`, then a `{ ... }`
/// (matched by depth) or, failing that, nothing more.
fn skip_function_body(tokens: &[Token], mut i: usize) -> usize {
    while matches!(tokens.get(i), Some(Token::Separator)) {
        i += 1;
    }
    let opens = |t: &Token| matches!(t, Token::Word(w) if w.is("{"));
    let closes = |t: &Token| matches!(t, Token::Word(w) if w.is("}"));
    if !tokens.get(i).is_some_and(opens) {
        return i;
    }
    let mut depth = 0;
    while i < tokens.len() {
        if opens(&tokens[i]) {
            depth += 1;
        } else if closes(&tokens[i]) {
            depth -= 1;
            if depth == 0 {
                return i + 1;
            }
        }
        i += 1;
    }
    i
}

enum Found {
    /// The program this command runs.
    Program(String),
    /// Only a builtin that prepares (`cd`, `export`): a name if nothing better comes.
    Preparation(String),
    /// No program: a compound command's header (`for x in a b`), or no word at all.
    Nothing,
}

/// The program one simple command runs, past assignments, keywords and wrappers.
fn program_of(words: &[Word]) -> Found {
    let mut i = 0;
    while i < words.len() {
        let word = &words[i];
        if is_assignment(word) || word.is_any(&KEYWORDS) {
            i += 1;
            continue;
        }
        if word.is_any(&HEADERS) || word.is_any(&CLOSERS) {
            return Found::Nothing;
        }
        let name = file_name(&word.text);
        let rest = &words[i + 1..];
        if !word.quoted && PREPARATIONS.contains(&word.text.as_str()) {
            return Found::Preparation(name);
        }
        if word.text == "eval" {
            let script: Vec<&str> = rest.iter().map(|w| w.text.as_str()).collect();
            return Found::Program(shell_program(&script.join(" ")).unwrap_or(name));
        }
        if SHELLS.contains(&name.as_str()) {
            let inner = shell_script(rest).and_then(shell_program);
            return Found::Program(inner.unwrap_or(name));
        }
        if let Some(skip) = wrapper_arguments(&name, rest) {
            if skip < rest.len() {
                i += 1 + skip;
                continue;
            }
            // `exec 2>&1` alone only redirects the shell's own descriptors.
            if name == "exec" {
                return Found::Preparation(name);
            }
        }
        if name.is_empty() {
            return Found::Nothing;
        }
        return Found::Program(name);
    }
    Found::Nothing
}

/// `FOO=1`: an assignment before the program.
fn is_assignment(word: &Word) -> bool {
    let Some((name, _)) = word.text.split_once('=') else {
        return false;
    };
    let mut chars = name.chars();
    chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

/// The file name of a program: `/usr/bin/make` → `make`, `./run.sh` → `run.sh`; empty for a
/// directory (`dir/`).
fn file_name(word: &str) -> String {
    word.rsplit('/').next().unwrap_or(word).to_string()
}

/// The string of `sh [options] -c STRING`, if the shell is given one.
fn shell_script(args: &[Word]) -> Option<&str> {
    for (i, Word { text: arg, .. }) in args.iter().enumerate() {
        if arg == "--" || (!arg.starts_with('-') && !arg.starts_with('+')) {
            return None;
        }
        if arg.starts_with('-') && !arg.starts_with("--") && arg.contains('c') {
            // `-l` may follow `-c` too (`bash -c -l SCRIPT`, as Claude Code runs it).
            return args[i + 1..]
                .iter()
                .find(|w| w.text != "-l" && w.text != "--login")
                .map(|w| w.text.as_str());
        }
    }
    None
}

/// For a wrapper that runs the program after it (`env`, `nice`, `sudo`...), how many of
/// `args` are its own (options, their values, `env`'s assignments); `None` for a program
/// that is not a wrapper.
fn wrapper_arguments(name: &str, args: &[Word]) -> Option<usize> {
    // Options that take a value in the next word.
    let with_value: &[&str] = match name {
        "exec" => &["-a"],
        "env" => &["-u", "-C", "-S", "--unset", "--chdir"],
        "nice" => &["-n", "--adjustment"],
        "sudo" => &["-u", "-g", "-C", "-D", "-h", "-p", "-r", "-t", "-U", "-T"],
        "timeout" => &["-s", "-k", "--signal", "--kill-after"],
        "ionice" => &["-c", "-n", "-p"],
        "stdbuf" => &["-i", "-o", "-e"],
        "time" | "nohup" | "command" | "builtin" | "setsid" => &[],
        _ => return None,
    };
    let mut i = 0;
    while i < args.len() {
        let arg = &args[i].text;
        if arg == "--" {
            i += 1;
            break;
        }
        if arg.starts_with('-') && arg.len() > 1 {
            i += if with_value.contains(&arg.as_str()) {
                2
            } else {
                1
            };
            continue;
        }
        if name == "env" && is_assignment(&args[i]) {
            i += 1;
            continue;
        }
        break;
    }
    // `timeout 5 cmd`: the duration comes before the program.
    if name == "timeout" && i < args.len() {
        i += 1;
    }
    Some(i)
}

#[cfg(test)]
mod tests;
