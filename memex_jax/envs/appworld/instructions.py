"""What an agent is told about AppWorld (no engine import)."""

INSTRUCTIONS = (
    "You act for your supervisor in a world of apps. The execute tool runs Python (its command) "
    "in a session that keeps variables between calls; `apis.<app>.<api>(...)` calls an app's "
    "API, and only what you print is shown. Look APIs up with apis.api_docs before using them, "
    "log in with the passwords from apis.supervisor.show_account_passwords(), and end with "
    "apis.supervisor.complete_task(answer=...) (no answer when the task asks none).")
