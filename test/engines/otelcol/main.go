package main

import (
	"log"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/confmap"
	"go.opentelemetry.io/collector/confmap/provider/fileprovider"
	"go.opentelemetry.io/collector/exporter"
	"go.opentelemetry.io/collector/exporter/debugexporter"
	"go.opentelemetry.io/collector/otelcol"
	"go.opentelemetry.io/collector/receiver"
	"go.opentelemetry.io/collector/receiver/otlpreceiver"
	"go.opentelemetry.io/collector/service/telemetry/otelconftelemetry"
	"github.com/open-telemetry/opentelemetry-collector-contrib/exporter/fileexporter"
)

func components() (otelcol.Factories, error) {
	var err error
	f := otelcol.Factories{}
	f.Receivers, err = otelcol.MakeFactoryMap[receiver.Factory](otlpreceiver.NewFactory())
	if err != nil {
		return f, err
	}
	f.Exporters, err = otelcol.MakeFactoryMap[exporter.Factory](debugexporter.NewFactory(), fileexporter.NewFactory())
	f.Telemetry = otelconftelemetry.NewFactory()
	return f, err
}

func main() {
	info := component.BuildInfo{Command: "dwunw-otelcol", Description: "test collector", Version: "0.161.0"}
	set := otelcol.CollectorSettings{
		BuildInfo: info,
		Factories: components,
		ConfigProviderSettings: otelcol.ConfigProviderSettings{
			ResolverSettings: confmap.ResolverSettings{
				ProviderFactories: []confmap.ProviderFactory{fileprovider.NewFactory()},
				DefaultScheme:     "file",
			},
		},
	}
	if err := otelcol.NewCommand(set).Execute(); err != nil {
		log.Fatal(err)
	}
}
