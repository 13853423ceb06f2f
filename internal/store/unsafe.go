package store

import "unsafe"

// uintptrOf returns the address of b's first byte (b is a mapping, not Go
// heap memory; the address is only reported to clients, never dereferenced).
func uintptrOf(b []byte) uintptr { return uintptr(unsafe.Pointer(unsafe.SliceData(b))) }
