// Command pulumi-resource-kubernetes serves the upstream Kubernetes provider (pkg/provider) with its schema.
//
// Upstream's own main package embeds files that its `go generate` writes and its module does not carry
// (schema-embed.json, terraform-mapping-embed.json), so it cannot be built from the module proxy as it is. This
// main does what upstream's does; receivers/build.py writes the two files from the module's schema.json and
// terraform-mapping.json (with the version set, as upstream's generate.go does) before building.
package main

import (
	_ "embed"

	"github.com/pulumi/pulumi-kubernetes/provider/v4/pkg/provider"
	"github.com/pulumi/pulumi-kubernetes/provider/v4/pkg/version"
)

//go:embed schema-embed.json
var pulumiSchema []byte

//go:embed terraform-mapping-embed.json
var terraformMapping []byte

func main() {
	provider.Serve("kubernetes", version.Version, pulumiSchema, terraformMapping)
}
