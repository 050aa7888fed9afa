use super::*;

#[test]
fn qualified_names_round_trip() {
    assert_eq!(qualified_name("docs", "search"), "mcp__docs__search");
    assert_eq!(
        split_qualified("mcp__docs__search"),
        Some(("docs", "search"))
    );
    assert_eq!(
        split_qualified("mcp__my-srv__get__x"),
        Some(("my-srv", "get__x"))
    );
    assert_eq!(split_qualified("mcp__docs__"), None);
    assert_eq!(split_qualified("Bash"), None);
}
