pub fn hash_password_cli() -> i32 { 1 }
