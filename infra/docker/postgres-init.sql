-- Run once by the postgres image on an empty volume (docker-entrypoint-initdb.d).
-- `events` is POSTGRES_DB; `registry` holds Apicurio Registry's storage.
CREATE DATABASE registry;
