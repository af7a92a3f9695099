//! Analyses the traces named on the command line and prints btt's text report: the trace
//! analysis alone, built without the rest of iolab, for profiling and benchmarking it
//! (`--json` prints the whole report as JSON instead).

fn main() {
    let mut json = false;
    let mut names: Vec<std::path::PathBuf> = Vec::new();
    for arg in std::env::args_os().skip(1) {
        if arg == "--json" {
            json = true;
        } else {
            names.push(arg.into());
        }
    }
    match iolab_blktrace::analyze::analyze_paths(&names, Default::default()) {
        Ok(report) if json => println!("{}", serde_json::to_string(&report).unwrap()),
        Ok(report) => print!("{}", iolab_blktrace::analyze::render::render(&report)),
        Err(e) => {
            eprintln!("analyze: {e}");
            std::process::exit(1);
        }
    }
}
