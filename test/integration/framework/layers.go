/*
Copyright The book-controller Authors.

Licensed under the Apache License, Version 2.0 (the "License");
you may not use this file except in compliance with the License.
You may obtain a copy of the License at

    http://www.apache.org/licenses/LICENSE-2.0

Unless required by applicable law or agreed to in writing, software
distributed under the License is distributed on an "AS IS" BASIS,
WITHOUT WARRANTIES OR CONDITIONS OF ANY KIND, either express or implied.
See the License for the specific language governing permissions and
limitations under the License.
*/

package framework

import (
	"fmt"
	"os"
	"strings"

	"ydzs.io/book-controller/pkg/controller"
)

// LayersEnv names the environment variable that turns optimization layers
// off for every controller a test run starts, in-process or as the binary:
// a comma-separated list of controller.LayerNames, or "all". `make
// test-classic` sets it to "all", so that the integration suite and the
// chaos suite's fault tests also prove sample-controller's loop correct.
const LayersEnv = "BOOK_DISABLE_LAYERS"

// LayersOff returns the layers the environment turns off; it panics on a
// name the controller does not know, as a test run with a mistyped
// variable proves nothing.
func LayersOff() controller.Layers {
	names := os.Getenv(LayersEnv)
	if names == "" {
		return controller.Layers{}
	}
	off, err := controller.ParseLayers(strings.Split(names, ","))
	if err != nil {
		panic(fmt.Sprintf("%s=%q: %v", LayersEnv, names, err))
	}
	return off
}

// LayerArgs returns the flags that turn off, in the binary, the layers the
// environment turns off.
func LayerArgs() []string {
	off := LayersOff().Names()
	if len(off) == 0 {
		return nil
	}
	return []string{"--disable-layers=" + strings.Join(off, ",")}
}

// layersOff is the set of layers off for a controller started with o: the
// environment's and o.Off, less o.On.
func (o ControllerOptions) layersOff() controller.Layers {
	env := LayersOff()
	off := func(env, off, on bool) bool { return (env || off) && !on }
	return controller.Layers{
		OwnWrites:           off(env.OwnWrites, o.Off.OwnWrites, o.On.OwnWrites),
		ConfigMapProjection: off(env.ConfigMapProjection, o.Off.ConfigMapProjection, o.On.ConfigMapProjection),
		CompactBooks:        off(env.CompactBooks, o.Off.CompactBooks, o.On.CompactBooks),
		LiveFirst:           off(env.LiveFirst, o.Off.LiveFirst, o.On.LiveFirst),
		ConnectionWarmUp:    off(env.ConnectionWarmUp, o.Off.ConnectionWarmUp, o.On.ConnectionWarmUp),
		NotReadyGauge:       off(env.NotReadyGauge, o.Off.NotReadyGauge, o.On.NotReadyGauge),
		WatchDecode:         off(env.WatchDecode, o.Off.WatchDecode, o.On.WatchDecode), // fork:line watchdecode
	}
}
