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

#[test]
fn restart_delay_doubles_from_the_second_exit_and_is_capped() {
    let s = Duration::from_secs;
    let delays: Vec<Duration> = (0..10).map(|n| restart_delay(s(1), n)).collect();
    assert_eq!(
        delays,
        [0, 0, 1, 2, 4, 8, 16, 32, 32, 32].map(s),
        "at once, then 1 s doubling up to 32 × the base"
    );
    assert_eq!(restart_delay(s(1), u32::MAX), s(32));
    assert_eq!(restart_delay(Duration::ZERO, 5), Duration::ZERO);
}
