"""Runtime governance: policies, decisions and approvals."""
