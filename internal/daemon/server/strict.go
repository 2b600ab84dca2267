package server

import (
	"errors"
	"reflect"

	"github.com/execbox/execbox/internal/strictjson"
)

// checkStrict refuses what encoding/json would quietly accept in a
// request body of type t (strictjson.Check: a key given twice, a key that
// matches a field only when case is ignored, nesting too deep) as a 400
// problem naming the key's path ("limits.memory").
func checkStrict(data []byte, t reflect.Type) error {
	var se *strictjson.Error
	if err := strictjson.Check(data, t); errors.As(err, &se) {
		return invalidField(se.Field, "%s", se.Msg)
	}
	return nil
}
