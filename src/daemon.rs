#[derive(clap::Args, Debug)]
pub struct DaemonArgs {}
pub fn main(_a: DaemonArgs) -> i32 { 1 }
