package main

/*
void v6dshim_set_version(const char *v);
*/
import "C"

// The fork guard is C (v6d.c): a forked child must not enter Go at all. What
// it answers without Go that only Go knows is handed over here, at load.
func init() { C.v6dshim_set_version(versionC()) }
