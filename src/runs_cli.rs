#[derive(clap::Args, Debug)]
pub struct RunsArgs {}
pub fn main(_a: RunsArgs) -> i32 { 1 }
