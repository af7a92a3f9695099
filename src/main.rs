fn main() {
    std::process::exit(iolab::cli::main());
}
