package sqlite

import (
	"database/sql/driver"
	"strings"

	sqlite "modernc.org/sqlite"

	"pimail/internal/store/envcodec"
)

func init() {
	// Functions for schema migration 5 (schema.go), which fills
	// blob_fetch and blob_addrs from the stored parse of existing blobs.
	//
	// pimail_envelope(parsed): the compact envelope of a stored
	// message.Parsed (JSON), NULL if it cannot be decoded (the migration
	// then leaves the blob without a blob_fetch row: FETCH reads its
	// stored parse as before, rather than the upgrade failing).
	sqlite.MustRegisterDeterministicScalarFunction("pimail_envelope", 1,
		func(_ *sqlite.FunctionContext, args []driver.Value) (driver.Value, error) {
			env, err := decodeEnvelope(sqlBytes(args[0]))
			if err != nil {
				return nil, nil
			}
			return envcodec.Encode(&env), nil
		})
	// pimail_header_size(parsed): the header size of a stored parse, -1
	// when it has no body, NULL if it cannot be decoded.
	sqlite.MustRegisterDeterministicScalarFunction("pimail_header_size", 1,
		func(_ *sqlite.FunctionContext, args []driver.Value) (driver.Value, error) {
			n, err := decodeBodyStart(sqlBytes(args[0]))
			if err != nil {
				return nil, nil
			}
			return n, nil
		})
	// pimail_lower(text): strings.ToLower, the folding of
	// store.ContainsFold, for the search columns of blob_addrs.
	sqlite.MustRegisterDeterministicScalarFunction("pimail_lower", 1,
		func(_ *sqlite.FunctionContext, args []driver.Value) (driver.Value, error) {
			return strings.ToLower(sqlText(args[0])), nil
		})
}

func sqlBytes(v driver.Value) []byte {
	switch x := v.(type) {
	case string:
		return []byte(x)
	case []byte:
		return x
	}
	return nil
}
