package pgschema

// isKeyword reports whether name is one of PostgreSQL's keywords that are
// not "unreserved" (reserved, type or function name, and column name
// keywords, up to PostgreSQL 17). Used bare as a table or schema name they
// are a syntax error, so they are always quoted. Unreserved keywords are
// valid bare identifiers.
func isKeyword(name string) bool {
	switch name {
	case "all", "analyse", "analyze", "and", "any", "array",
		"as", "asc", "asymmetric", "both", "case", "cast", "check", "collate",
		"column", "constraint", "create", "current_catalog", "current_date",
		"current_role", "current_time", "current_timestamp", "current_user",
		"default", "deferrable", "desc", "distinct", "do", "else", "end",
		"except", "false", "fetch", "for", "foreign", "from", "grant", "group",
		"having", "in", "initially", "intersect", "into", "lateral", "leading",
		"limit", "localtime", "localtimestamp", "not", "null", "offset", "on",
		"only", "or", "order", "placing", "primary", "references", "returning",
		"select", "session_user", "some", "symmetric", "system_user", "table",
		"then", "to", "trailing", "true", "union", "unique", "user", "using",
		"variadic", "when", "where", "window", "with", "authorization", "binary",
		"collation", "concurrently", "cross", "current_schema", "freeze", "full",
		"ilike", "inner", "is", "isnull", "join", "left", "like", "natural",
		"notnull", "outer", "overlaps", "right", "similar", "tablesample",
		"verbose", "between", "bigint", "bit", "boolean", "char", "character",
		"coalesce", "dec", "decimal", "exists", "extract", "float", "greatest",
		"grouping", "inout", "int", "integer", "interval", "json", "json_array",
		"json_arrayagg", "json_exists", "json_object", "json_objectagg",
		"json_query", "json_scalar", "json_serialize", "json_table",
		"json_value", "least", "merge_action", "national", "nchar", "none",
		"normalize", "nullif", "numeric", "out", "overlay", "position",
		"precision", "real", "row", "setof", "smallint", "substring", "time",
		"timestamp", "treat", "trim", "values", "varchar", "xmlattributes",
		"xmlconcat", "xmlelement", "xmlexists", "xmlforest", "xmlnamespaces",
		"xmlparse", "xmlpi", "xmlroot", "xmlserialize", "xmltable":
		return true
	}
	return false
}
