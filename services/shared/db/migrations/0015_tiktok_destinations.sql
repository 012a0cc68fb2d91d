-- Second and later TikTok destinations: the advertiser's time zone (the records' conversion_date_time is in the
-- ad account's zone) and the PKCE verifier of a destination's connect flow (sealed, as for oauth_states).
ALTER TABLE destinations ADD COLUMN time_zone text;
ALTER TABLE destination_oauth_states ADD COLUMN code_verifier_enc text;
