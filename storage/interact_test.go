package storage_test

import (
	"encoding/json"
	"testing"

	"github.com/stemflow/stem/storage"
)

// The catalog's updates are its event types on update topics, their
// schemas read; the other event types are left as they are.
func TestCatalogUpdates(t *testing.T) {
	schema, _ := json.Marshal(storage.UpdateSchema{Request: json.RawMessage(`{"type":"integer"}`), Validator: true})
	c := storage.Catalog{Events: []storage.EventType{
		{Topic: "orders.shipped"},
		{Topic: storage.UpdateTopic("add"), PayloadSchema: schema, Worker: "w1"},
		{Topic: storage.UpdateTopic("broken"), PayloadSchema: json.RawMessage(`[1]`)},
	}}
	ups, events := c.Updates()
	if len(events) != 1 || events[0].Topic != "orders.shipped" {
		t.Fatalf("other event types %+v; want orders.shipped alone", events)
	}
	if len(ups) != 2 {
		t.Fatalf("updates %+v; want add and broken", ups)
	}
	if u := ups[0]; u.Name != "add" || !u.Schema.Validator || string(u.Schema.Request) != `{"type":"integer"}` || u.Worker != "w1" || u.SchemaErr != nil {
		t.Fatalf("update add read as %+v", u)
	}
	if u := ups[1]; u.Name != "broken" || u.SchemaErr == nil || u.Schema.Validator {
		t.Fatalf("update with a malformed schema read as %+v; want its error and no schema", u)
	}
	if name, ok := storage.UpdateNameOf(storage.UpdateTopic("add")); !ok || name != "add" {
		t.Fatalf("UpdateNameOf(UpdateTopic(add)) = %q, %v", name, ok)
	}
	if _, ok := storage.UpdateNameOf("orders.shipped"); ok {
		t.Fatal("an event topic read as an update's")
	}
}
