// Package pgschema holds what the module's PostgreSQL components share about
// their tables: names validated and quoted as identifiers, so that a
// configured name can never be read as SQL, advisory lock keys, and the
// creation of a schema and its tables under advisory locks, so that
// instances starting together do not race on CREATE ... IF NOT EXISTS.
package pgschema
