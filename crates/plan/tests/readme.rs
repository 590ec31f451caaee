//! README's table of expected s/proof is the planner's: a change to the model
//! that changes a cell fails here until the README is printed again
//! (`cargo run -p cuzk-plan --example readme_table`).

#[path = "../examples/readme_table.rs"]
mod readme_table;

#[test]
fn the_readmes_table_is_the_planners() {
    let readme =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../../README.md")).unwrap();
    let table = readme_table::table();
    assert!(
        readme.contains(&table),
        "README.md's planner table is not the planner's; print it again with \
         `cargo run -p cuzk-plan --example readme_table`:\n{table}"
    );
}
