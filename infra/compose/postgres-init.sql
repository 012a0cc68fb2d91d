-- Run once by the postgres image on an empty volume (docker-entrypoint-initdb.d): the registry's database beside
-- the service's (POSTGRES_DB=events), owned by the same user.
CREATE DATABASE registry;
