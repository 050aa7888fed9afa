//! The integration tests, one binary (one link of the crate and its
//! dependencies instead of one per file). Each module is one former test
//! file; `support` holds what they share. `cloud_opensandbox_server` stays a
//! binary of its own (`harness = false`: it is also the stand-in execd).

mod support;

mod agent_cli;
mod agent_demos;
mod agent_openai;
mod backend_suite;
mod bad_input;
mod bash_tool;
mod cli;
mod cli_conventions;
mod cli_shell;
mod cli_terminal;
mod cloud_cli;
mod cloud_daytona;
mod cloud_e2b;
mod cloud_opensandbox;
mod command_input;
mod concurrent_edits;
mod config_gaps;
mod disk_full;
mod file_modes;
mod floods;
mod heal;
mod heal_cloud;
mod heal_k8s;
mod isolation_env;
mod k8s_backend;
mod k8s_cluster;
mod k8s_kubectl;
mod k8s_profile;
mod layers;
mod manager;
mod mcp_call_timeout;
mod mcp_decl;
mod mcp_real;
mod mcp_redact;
mod mcp_serve_limits;
mod mcp_session;
mod mcp_stdio;
mod offload;
mod orphans;
mod provision_race;
mod read_only;
mod search_skips;
mod shell_session;
mod skills;
mod skills_hostile;
mod stale_temps;
mod tools_rwe;
mod tools_search;
mod tui_agent;
mod tui_cases;
mod tui_habits;
mod tui_keys;
mod tui_panes_extra;
mod tui_recovery;
mod tui_search;
mod tui_snapshots;
mod tui_tmux;
mod tui_unicode;
mod write_edit_cost;
