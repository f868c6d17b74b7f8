fn main() {
    // `sqlx::migrate!` embeds the migrations: rebuild when one is added.
    println!("cargo:rerun-if-changed=migrations");
}
