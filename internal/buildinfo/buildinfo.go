package buildinfo

import "runtime/debug"

// Version, when set with -ldflags -X, is the version reported, whatever the build info says.
var Version string

// devel is what the go command itself records when it knows no version.
const devel = "(devel)"

// Info is a program's version and the Go release that built it.
type Info struct {
	Version   string `json:"version"`
	GoVersion string `json:"goVersion,omitempty"`
}

// Read is the running program's Info: Current of Version and the binary's build info.
func Read() Info {
	build, ok := debug.ReadBuildInfo()
	return Current(Version, build, ok)
}

// Current is the version to report: the linker's override, else the main module's recorded
// version, else "(devel)".
func Current(override string, build *debug.BuildInfo, ok bool) Info {
	var info Info
	if ok && build != nil {
		info.Version, info.GoVersion = build.Main.Version, build.GoVersion
	}
	if override != "" {
		info.Version = override
	}
	if info.Version == "" {
		info.Version = devel
	}
	return info
}
