"""The sandbox apps run in: headless Chromium workers and their pages (`browser`), the
loopback server each worker serves apps and the CDN mirror from (`app_server`), and V8
coverage of what an app ran (`coverage`)."""
