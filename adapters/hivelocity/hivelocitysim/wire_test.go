package hivelocitysim

import (
	"bytes"
	"encoding/json"
	"reflect"
	"testing"

	hv "github.com/hivelocity/hivelocity-client-go/client"
	"github.com/stretchr/testify/require"
)

// filled returns a value of T with every field set to a non-zero value, so that every JSON key is sent.
func filled[T any](tb testing.TB) T {
	tb.Helper()
	var v T
	fill(tb, reflect.ValueOf(&v).Elem())
	return v
}

func fill(tb testing.TB, v reflect.Value) {
	switch v.Kind() {
	case reflect.String:
		v.SetString("x")
	case reflect.Bool:
		v.SetBool(true)
	case reflect.Int32, reflect.Int:
		v.SetInt(7)
	case reflect.Float32:
		v.SetFloat(1.5)
	case reflect.Slice:
		v.Set(reflect.MakeSlice(v.Type(), 1, 1))
		fill(tb, v.Index(0))
	case reflect.Map:
		v.Set(reflect.MakeMap(v.Type()))
	case reflect.Struct:
		for i := range v.NumField() {
			fill(tb, v.Field(i))
		}
	case reflect.Interface:
		v.Set(reflect.ValueOf("x"))
	case reflect.Pointer:
		v.Set(reflect.New(v.Type().Elem()))
		fill(tb, v.Elem())
	default:
		tb.Fatalf("fill: unhandled kind %s", v.Kind())
	}
}

// requireDecodes requires from, encoded, to decode into a To with no unknown key and no type mismatch.
func requireDecodes[To any](tb testing.TB, from any) {
	tb.Helper()
	b, err := json.Marshal(from)
	require.NoError(tb, err)
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	var to To
	require.NoError(tb, dec.Decode(&to), "%T → %T: %s", from, to, b)
}

// TestWireMatchesClientModels checks the hand-written wire types against the official client's models: every key
// the simulator sends is one the client decodes, and every key the client sends is one the simulator reads.
func TestWireMatchesClientModels(t *testing.T) {
	t.Run("BareMetalDevice", func(t *testing.T) { requireDecodes[hv.BareMetalDevice](t, filled[bareMetalDevice](t)) })
	t.Run("DeviceDump", func(t *testing.T) { requireDecodes[hv.DeviceDump](t, filled[deviceDump](t)) })
	t.Run("DeviceTag", func(t *testing.T) { requireDecodes[hv.DeviceTag](t, filled[deviceTag](t)) })
	t.Run("DevicePower", func(t *testing.T) { requireDecodes[hv.DevicePower](t, filled[devicePower](t)) })
	t.Run("SshKeyResponse", func(t *testing.T) { requireDecodes[hv.SshKeyResponse](t, filled[sshKeyResponse](t)) })
	t.Run("OptionDump", func(t *testing.T) { requireDecodes[hv.OptionDump](t, filled[optionDump](t)) })
	t.Run("BareMetalDeviceUpdate in", func(t *testing.T) {
		requireDecodes[bareMetalDeviceUpdate](t, filled[hv.BareMetalDeviceUpdate](t))
	})
	t.Run("DeviceTag in", func(t *testing.T) { requireDecodes[deviceTag](t, filled[hv.DeviceTag](t)) })
}
