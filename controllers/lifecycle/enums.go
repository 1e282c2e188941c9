package lifecycle

import (
	"github.com/berth-dev/berth/admission"
	berthv1 "github.com/berth-dev/berth/apis/v1alpha1"
)

// classes maps every provisioning class of the API to the engine's; a test
// checks that every class declared in apis/ has an entry.
var classes = map[berthv1.ProvisioningClass]admission.ProvisioningClass{
	berthv1.ProvisioningClassCheckCapacity: admission.ClassCheckCapacity,
	berthv1.ProvisioningClassAtomicScaleUp: admission.ClassAtomicScaleUp,
}

// ClassToEngine is the engine's provisioning class. A class berth does not
// write (another integration's) books capacity that exists, as the engine
// plans nothing for it.
func ClassToEngine(c berthv1.ProvisioningClass) admission.ProvisioningClass {
	if out, ok := classes[c]; ok {
		return out
	}
	return admission.ClassCheckCapacity
}

// ClassToAPI is the API's provisioning class, the ProvisioningRequest class
// the booking is written with.
func ClassToAPI(c admission.ProvisioningClass) berthv1.ProvisioningClass {
	for api, engine := range classes {
		if engine == c {
			return api
		}
	}
	return berthv1.ProvisioningClassCheckCapacity
}
