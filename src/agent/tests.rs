use super::*;

#[test]
fn malformed_arguments_give_a_readable_error() {
    let e = parse_call_args("Read", "{\"file_path\": ").unwrap_err();
    assert!(e.contains("Invalid arguments for tool 'Read'"), "{e}");
    assert!(e.contains("malformed"), "{e}");
    assert!(
        parse_call_args("Read", "[1]")
            .unwrap_err()
            .contains("an array")
    );
    assert_eq!(parse_call_args("Read", "  ").unwrap(), json!({}));
}
