//! `tether man`: tether(1) as roff, from the same definitions as `--help` (clap_mangen);
//! `--dir DIR` writes tether.1 and a page per visible subcommand (tether-run.1, ...) for
//! `man` to find (docs/cli.md: Man pages).

use std::path::Path;

use tether::exit::{EXIT_FAILED, OrExit, exit_code};
use tether::postmortem::exit_of_writing;

/// Prints tether(1) on stdout.
pub fn print(cli: clap::Command) -> i32 {
    let mut page = Vec::new();
    let written = clap_mangen::Man::new(prepared(cli))
        .source(source())
        .render(&mut page)
        .and_then(|()| std::io::Write::write_all(&mut std::io::stdout().lock(), &page));
    exit_of_writing(written, "the man page")
}

/// Writes tether.1 and tether-SUBCOMMAND.1 for each visible subcommand into `dir` (made if
/// missing), then says how many and how `man` finds them.
pub fn write_pages(cli: clap::Command, dir: &Path) -> i32 {
    exit_code(|| {
        let written = pages(cli, dir)
            .map_err(|err| format!("cannot write the man pages to {}: {err}", dir.display()))
            .or_exit(EXIT_FAILED)?;
        println!(
            "tether: wrote {written} pages (tether.1, tether-run.1, ...) to {}; `man tether` \
             finds them when that directory's parent is on the manual path (`manpath`)",
            dir.display()
        );
        Ok(0)
    })
}

/// The pages written: clap_mangen's `generate_to`, but with every page's footer from
/// [`source`], and, as everything tether writes, private whatever the umask (a directory
/// made 0700, pages 0600, a link at a page's name never followed).
fn pages(cli: clap::Command, dir: &Path) -> std::io::Result<usize> {
    use std::os::unix::fs::DirBuilderExt;
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)?;
    let cli = prepared(cli);
    let mut written = 0;
    for page in std::iter::once(&cli).chain(cli.get_subcommands()) {
        let man = clap_mangen::Man::new(page.clone()).source(source());
        let mut roff = Vec::new();
        man.render(&mut roff)?;
        tether::export::output::write_private(&dir.join(man.get_filename()), &roff)?;
        written += 1;
    }
    Ok(written)
}

/// The command line the pages describe: the visible subcommands, each with a page (no `help`
/// subcommand, which has none), built so that each knows its page's name (`tether-run`).
fn prepared(cli: clap::Command) -> clap::Command {
    let mut cli = super::visible(cli).disable_help_subcommand(true);
    cli.build();
    cli
}

/// Every page's footer: tether and its version (a subcommand has no version of its own, and
/// its footer would read `run`).
fn source() -> String {
    format!("tether {}", env!("CARGO_PKG_VERSION"))
}
