-- Why a connection left `connected`, as a machine-readable code beside the human status_reason (issue 14).
-- 'credentials_unreadable': its stored tokens do not open with CREDENTIALS_KEY (a wrong or missing key). The
-- ciphertexts are kept (never deleted for this reason), so that a restart with the right key restores the
-- connection; its conversions are parked meanwhile.
ALTER TABLE connections ADD COLUMN status_code text;
