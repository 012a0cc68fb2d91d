-- Why a connection left `connected`, as a machine-readable code beside the human status_reason (issue 14).
-- 'credentials_unreadable': its stored tokens do not open with CREDENTIALS_KEY (a wrong or missing key). The
-- ciphertexts are kept (never deleted for this reason), so that a restart with the right key restores the
-- connection; its conversions are parked meanwhile.
ALTER TABLE connections ADD COLUMN status_code text;

-- The browser that opened a connect link (GET /oauth/start): the SHA-256 of a random value kept in that
-- browser's cookie. The callback is honoured only from that browser, so a state that leaks (logs, referrers, a
-- shared link) cannot connect the workspace to someone else's ad account (issue 14).
ALTER TABLE oauth_states ADD COLUMN binding_hash text;
