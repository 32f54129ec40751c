"""Alert-triggered automation: `opsctl serve` receives webhooks and acts by policy."""
