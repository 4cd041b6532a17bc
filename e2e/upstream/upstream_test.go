//go:build e2e

package upstream

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	kerrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/loomxr/loom/e2e/framework"
	"github.com/loomxr/loom/pkg/fieldpath"
	"github.com/loomxr/loom/pkg/stack"
)

// The upstream suite: Crossplane's own end-to-end tests of its API
// extensions, whose manifests TestUpstream applies to Loom.
const (
	crossplaneModule  = "github.com/crossplane/crossplane"
	crossplaneVersion = "v1.20.11"
	// upstreamFieldManager is the field manager of upstream's suite
	// (test/e2e/consts.go).
	upstreamFieldManager = "crossplane-e2e-tests"
)

// upstreamFunctions maps the name of each Function that upstream's
// manifests install (a pkg.crossplane.io package) to the test function of
// e2e/testfn that does the same job.
var upstreamFunctions = map[string]string{ //nolint:gochecknoglobals // Treated as a constant.
	"function-dummy":               "dummy",
	"function-auto-ready":          "auto-ready",
	"function-patch-and-transform": "patch-and-transform",
}

// Conditions upstream's cases wait for, as upstream's helpers compare them:
// type, status and reason; no message, no observedGeneration.
var (
	upstreamAvailable         = upstreamCondition{Type: "Ready", Status: "True", Reason: "Available"}
	upstreamWatchingComposite = upstreamCondition{Type: "Established", Status: "True", Reason: "WatchingCompositeResource"}
)

// upstreamNotFound is upstream's funcs.NotFound: the field must not exist.
type upstreamNotFound struct{}

func (upstreamNotFound) String() string { return "NotFound" }

// TestUpstream runs the cases of Crossplane v1.20.11's own end-to-end suite
// for API extensions (test/e2e/apiextensions_test.go,
// xrd_validation_test.go, comp_schema_validation_test.go and
// usage_test.go) against Loom,
// with upstream's manifests read from
// the github.com/crossplane/crossplane module (downloaded from the module
// proxy in the test's setup) and changed in code only where Loom replaces
// Crossplane's package manager:
//
//   - each pkg.crossplane.io Function becomes a loom.dev Function of the
//     same name, pointing at the test function of e2e/testfn that does the
//     job of upstream's (function-dummy, function-auto-ready,
//     function-patch-and-transform), served locally over mutual TLS;
//   - pkg.crossplane.io Providers (provider-nop) and
//     DeploymentRuntimeConfigs are dropped: the stack's test provider
//     already serves provider-nop's NopResource (nop.crossplane.io), so the
//     managed resources stay as they are, and upstream's wait for the
//     Provider to be Healthy and Active becomes a wait for the NopResource
//     CRD to be Established.
//
// Each case does what upstream's does, step by step (setup, assessments,
// teardown), with upstream's deadlines, and asserts what upstream asserts,
// with upstream's condition comparison (TestPropagateFieldsRemovalToXRAfterUpgrade
// without its steps that reinstall Crossplane with Helm; see the case).
// The cases share the stack and upstream's object names, so they run one
// after the other, and each case's teardown (which always runs) leaves
// nothing behind.
//
// Upstream cases left out, and why:
//
//   - The manifests in apiextensions/environment: no test of v1.20.11 uses
//     them (they belong to the EnvironmentConfig tests upstream removed), so
//     there is nothing upstream asserts to compare with.
//   - Every other upstream e2e test (install_test.go, pkg_test.go, and
//     the rest) tests Crossplane's installation or package manager.
func TestUpstream(t *testing.T) {
	root := upstreamSuiteDir(t)
	env := framework.StartStack(t)
	s := &upstreamSuite{env: env, root: root, functions: startUpstreamFunctions(t, env)}

	// A slice, not a map: the cases share object names, and running them
	// in upstream's order makes a failure easier to reproduce.
	cases := []struct {
		name      string
		manifests string
		run       func(t *testing.T, c *upstreamRun)
	}{
		{
			name:      "TestCompositionMinimal",
			manifests: "composition/minimal",
			run: func(t *testing.T, c *upstreamRun) {
				c.teardown(t, c.deleteClaim("claim.yaml"), c.deletePrerequisites())
				c.step(t, "PrerequisitesAreCreated", c.prerequisites(true)...)
				c.step(t, "CreateClaim",
					c.apply("claim.yaml"),
					c.createdWithin(30*time.Second, "claim.yaml"),
					c.haveConditionWithin(5*time.Minute, "claim.yaml", upstreamAvailable))
			},
		},
		{
			name:      "TestCompositionInvalidComposed",
			manifests: "composition/invalid-composed",
			run: func(t *testing.T, c *upstreamRun) {
				c.teardown(t, func() error {
					return errors.Join(c.delete("xr.yaml")(), c.deletedWithin(2*time.Minute, "xr.yaml")())
				}, c.deletePrerequisites())
				c.step(t, "PrerequisitesAreCreated", c.prerequisites(true)...)
				c.step(t, "CreateXR",
					c.apply("xr.yaml"),
					c.createdWithin(30*time.Second, "xr.yaml"))
				c.step(t, "XRStillAnnotated",
					c.haveFieldValueWithin(time.Minute, "xr.yaml", "metadata.annotations[exampleVal]", "foo"))
			},
		},
		{
			name:      "TestCompositionPatchAndTransform",
			manifests: "composition/patch-and-transform",
			run: func(t *testing.T, c *upstreamRun) {
				c.teardown(t, c.deleteClaim("claim.yaml"), c.deletePrerequisites())
				c.step(t, "CreatePrerequisites", c.prerequisites(true)...)
				c.step(t, "CreateClaim",
					c.apply("claim.yaml"),
					c.createdWithin(30*time.Second, "claim.yaml"))
				c.step(t, "ClaimIsReady",
					c.haveConditionWithin(30*time.Second, "claim.yaml", upstreamAvailable))
				c.step(t, "ClaimHasPatchedField",
					c.haveFieldValueWithin(30*time.Second, "claim.yaml", "status.coolerField", "I'M COOL!"))
			},
		},
		{
			name:      "TestCompositionRevisionSelection",
			manifests: "composition/realtime-revision-selection",
			run: func(t *testing.T, c *upstreamRun) {
				c.teardown(t, c.deleteClaim("claim.yaml"), c.deletePrerequisites())
				c.step(t, "PrerequisitesAreCreated", c.prerequisites(true)...)
				c.step(t, "CreateClaim",
					c.apply("claim.yaml"),
					c.createdWithin(30*time.Second, "claim.yaml"))
				c.step(t, "ClaimIsReady",
					c.haveConditionWithin(30*time.Second, "claim.yaml", upstreamAvailable))
				c.step(t, "UpdateComposition", c.apply("composition-update.yaml"))
				c.step(t, "ClaimHasPatchedField",
					c.haveFieldValueWithin(30*time.Second, "claim.yaml", "status.coolerField", "I'M COOL!"))
			},
		},
		{
			name:      "TestCompositionFunctions",
			manifests: "composition/functions",
			run: func(t *testing.T, c *upstreamRun) {
				c.teardown(t, c.deleteClaim("claim.yaml"), c.deletePrerequisites())
				c.step(t, "CreatePrerequisites", c.prerequisites(true)...)
				c.step(t, "CreateClaim",
					c.apply("claim.yaml"),
					c.createdWithin(30*time.Second, "claim.yaml"))
				c.step(t, "ClaimIsReady",
					c.haveConditionWithin(60*time.Second, "claim.yaml", upstreamAvailable))
				c.step(t, "ClaimHasPatchedField",
					c.haveFieldValueWithin(30*time.Second, "claim.yaml", "status.coolerField", "I'M COOLER!"))
			},
		},
		{
			name:      "TestPropagateFieldsRemovalToXR",
			manifests: "composition/propagate-field-removals",
			run: func(t *testing.T, c *upstreamRun) {
				c.teardown(t, c.deleteClaim("claim.yaml"), c.deletePrerequisites())
				c.step(t, "PrerequisitesAreCreated", c.prerequisites(false)...)
				c.step(t, "CreateClaim",
					c.applyClaim("claim.yaml"),
					c.createdWithin(30*time.Second, "claim.yaml"),
					c.haveConditionWithin(5*time.Minute, "claim.yaml", upstreamAvailable))
				c.step(t, "UpdateClaim", c.applyClaim("claim-update.yaml"))
				c.step(t, "FieldsRemovalPropagatedToXR", append(c.fieldRemovalsPropagated(),
					c.claimUnderTestMustNotChangeWithin(time.Minute),
					// Status is propagated XR -> claim.
					c.haveFieldValueWithin(5*time.Minute, "claim-update.yaml", "status.coolerField", "I'm cool!"),
					c.compositeUnderTestMustNotChangeWithin(time.Minute))...)
			},
		},
		{
			// Upstream first reinstalls Crossplane with Helm with
			// --enable-ssa-claims=false, so that claims' XRs are written
			// by client-side apply, and after CreateClaim reinstalls it
			// without (EnableSSAClaims), to test that the upgrade of the
			// XR's field managers lets the claim's removals through. Loom
			// has no flag to flip: its binder always creates an XR with a
			// plain create (a client-side field manager) and takes those
			// fields over at its first apply, which is the upgrade this
			// case tests. The Helm steps are left out; every other step
			// is upstream's.
			name:      "TestPropagateFieldsRemovalToXRAfterUpgrade",
			manifests: "composition/propagate-field-removals",
			run: func(t *testing.T, c *upstreamRun) {
				c.teardown(t, c.deleteClaim("claim.yaml"), c.deletePrerequisites())
				c.step(t, "PrerequisitesAreCreated", c.prerequisites(false)...)
				c.step(t, "CreateClaim",
					c.applyClaim("claim.yaml"),
					c.createdWithin(30*time.Second, "claim.yaml"),
					c.haveConditionWithin(5*time.Minute, "claim.yaml", upstreamAvailable))
				c.step(t, "UpdateClaim",
					c.applyClaim("claim-update.yaml"),
					c.claimUnderTestMustNotChangeWithin(time.Minute))
				c.step(t, "FieldsRemovalPropagatedToXR", append(c.fieldRemovalsPropagated(),
					c.claimUnderTestMustNotChangeWithin(time.Minute),
					c.haveFieldValueWithin(5*time.Minute, "claim-update.yaml", "status.coolerField", "I'm cool!"),
					c.compositeUnderTestMustNotChangeWithin(time.Minute))...)
			},
		},
		{
			name:      "TestPropagateFieldsRemovalToComposed",
			manifests: "composition/propagate-field-removals",
			run: func(t *testing.T, c *upstreamRun) {
				nop := schema.GroupKind{Group: "nop.crossplane.io", Kind: "NopResource"}
				c.teardown(t, c.deleteClaim("claim.yaml"), c.deletePrerequisites())
				c.step(t, "PrerequisitesAreCreated", c.prerequisites(false)...)
				c.step(t, "CreateClaim",
					c.applyClaim("claim.yaml"),
					c.createdWithin(30*time.Second, "claim.yaml"),
					c.haveConditionWithin(5*time.Minute, "claim.yaml", upstreamAvailable))
				c.step(t, "ConvertToPipelineCompositionUpgrade", c.apply("composition-xfn.yaml"))
				c.step(t, "UpdateClaim", c.applyClaim("claim-update.yaml"))
				c.step(t, "FieldsRemovalPropagatedToMR",
					c.composedHaveFieldValueWithin(time.Minute, "claim.yaml", "spec.forProvider.fields.tags[newtag]", upstreamNotFound{}, nop),
					c.composedHaveFieldValueWithin(time.Minute, "claim.yaml", "spec.forProvider.fields.tags[tag]", "v1", nop))
			},
		},
		{
			name:      "TestCompositionSelection",
			manifests: "composition/composition-selection",
			run: func(t *testing.T, c *upstreamRun) {
				c.teardown(t, c.deleteClaim("claim.yaml"), c.deletePrerequisites())
				c.step(t, "PrerequisitesAreCreated", c.prerequisites(false)...)
				c.step(t, "CreateClaim",
					c.applyClaim("claim.yaml"),
					c.createdWithin(30*time.Second, "claim.yaml"),
					c.haveConditionWithin(5*time.Minute, "claim.yaml", upstreamAvailable))
				c.step(t, "LabelSelectorPropagatesToXR",
					// The label selector should be propagated claim -> XR.
					c.compositeHasFieldValueWithin(time.Minute, "claim.yaml", "spec.compositionSelector.matchLabels[environment]", "testing"),
					c.compositeHasFieldValueWithin(time.Minute, "claim.yaml", "spec.compositionSelector.matchLabels[region]", "AU"),
					// The XR should select the composition.
					c.compositeHasFieldValueWithin(time.Minute, "claim.yaml", "spec.compositionRef.name", "testing-au"),
					// The selected composition should propagate XR -> claim.
					c.haveFieldValueWithin(time.Minute, "claim.yaml", "spec.compositionRef.name", "testing-au"))
				// Remove the region label from the composition selector.
				c.step(t, "UpdateClaim", c.applyClaim("claim-update.yaml"))
				c.step(t, "UpdatedLabelSelectorPropagatesToXR",
					c.compositeHasFieldValueWithin(time.Minute, "claim.yaml", "spec.compositionSelector.matchLabels[environment]", "testing"),
					c.compositeHasFieldValueWithin(time.Minute, "claim.yaml", "spec.compositionSelector.matchLabels[region]", upstreamNotFound{}),
					// The XR and the claim should still have the composition selected.
					c.compositeHasFieldValueWithin(time.Minute, "claim.yaml", "spec.compositionRef.name", "testing-au"),
					c.haveFieldValueWithin(time.Minute, "claim.yaml", "spec.compositionRef.name", "testing-au"),
					// The label selector shouldn't reappear on the claim
					// (crossplane/crossplane#3992).
					c.haveFieldValueWithin(time.Minute, "claim.yaml", "spec.compositionSelector.matchLabels[environment]", "testing"),
					c.haveFieldValueWithin(time.Minute, "claim.yaml", "spec.compositionSelector.matchLabels[region]", upstreamNotFound{}))
			},
		},
		{
			name:      "TestBindToExistingXR",
			manifests: "composition/bind-existing-xr",
			run: func(t *testing.T, c *upstreamRun) {
				c.teardown(t, func() error {
					return errors.Join(
						c.delete("claim.yaml")(),
						c.deletedWithin(2*time.Minute, "claim.yaml")(),
						// Deleting the claim should delete the XR.
						c.deletedWithin(2*time.Minute, "xr.yaml")())
				}, c.deletePrerequisites())
				c.step(t, "PrerequisitesAreCreated", c.prerequisites(false)...)
				// Create an XR we'll later bind to.
				c.step(t, "CreateXR",
					c.applyClaim("xr.yaml"),
					c.createdWithin(30*time.Second, "xr.yaml"),
					c.haveConditionWithin(5*time.Minute, "xr.yaml", upstreamAvailable))
				c.step(t, "XRFieldHasOriginalValues",
					c.haveFieldValueWithin(time.Minute, "xr.yaml", "spec.coolField", "Set by XR"))
				// Create a claim that explicitly asks to bind to the above XR.
				c.step(t, "CreateClaim",
					c.applyClaim("claim.yaml"),
					c.createdWithin(30*time.Second, "claim.yaml"),
					c.haveConditionWithin(5*time.Minute, "claim.yaml", upstreamAvailable))
				c.step(t, "XRIsBoundToClaim",
					c.haveFieldValueWithin(time.Minute, "xr.yaml", "spec.claimRef.name", "bind-existing-xr"))
				c.step(t, "XRFieldChangesToClaimValue",
					c.haveFieldValueWithin(time.Minute, "xr.yaml", "spec.coolField", "Set by claim"))
			},
		},
		{
			name:      "TestCompositionValidation",
			manifests: "composition/validation",
			run: func(t *testing.T, c *upstreamRun) {
				c.teardown(t, func() error {
					return errors.Join(c.delete("*-valid.yaml")(), c.deletedWithin(30*time.Second, "*-valid.yaml")())
				}, c.deletePrerequisites())
				c.step(t, "CreatePrerequisites", c.prerequisites(true)...)
				// A valid Composition should be created when validated in strict mode.
				c.step(t, "ValidCompositionIsAcceptedStrictMode",
					c.apply("composition-valid.yaml"),
					c.createdWithin(30*time.Second, "composition-valid.yaml"))
				// A valid Composition defining a valid ToJson String
				// transform should be created when validated in strict mode.
				c.step(t, "ValidCompositionWithAToJsonTransformIsAcceptedStrictMode",
					c.apply("composition-transform-tojson-valid.yaml"),
					c.createdWithin(30*time.Second, "composition-transform-tojson-valid.yaml"))
				// An invalid Composition should be rejected when validated in strict mode.
				c.step(t, "InvalidCompositionIsRejectedStrictMode", c.failToApply("composition-invalid.yaml"))
				// An invalid Composition should be accepted when validated in warn mode.
				c.step(t, "InvalidCompositionIsAcceptedWarnMode",
					c.apply("composition-warn-valid.yaml"),
					c.createdWithin(30*time.Second, "composition-warn-valid.yaml"))
				// A Composition that updates immutable fields should be
				// rejected when validated in strict mode.
				c.step(t, "ImmutableCompositionFieldUpdateIsRejectedStrictMode", c.failToApply("composition-invalid-immutable.yaml"))
			},
		},
		{
			name:      "TestXRDValidation",
			manifests: "xrd/validation",
			run: func(t *testing.T, c *upstreamRun) {
				c.teardown(t, func() error {
					return errors.Join(c.delete("*-valid.yaml")(), c.deletedWithin(30*time.Second, "*-valid.yaml")(), c.definitionsGone(time.Minute, "*-valid.yaml")())
				})
				// A valid XRD should be created.
				c.step(t, "ValidNewXRDIsAccepted",
					c.apply("xrd-valid.yaml"),
					c.createdWithin(30*time.Second, "xrd-valid.yaml"),
					c.haveConditionWithin(time.Minute, "xrd-valid.yaml", upstreamWatchingComposite))
				// An update to a valid XRD should be accepted.
				c.step(t, "ValidUpdatedXRDIsAccepted",
					c.apply("xrd-valid-updated.yaml"),
					c.createdWithin(30*time.Second, "xrd-valid-updated.yaml"),
					c.haveConditionWithin(time.Minute, "xrd-valid-updated.yaml", upstreamWatchingComposite))
				// An update to an invalid XRD should be rejected.
				c.step(t, "InvalidXRDUpdateIsRejected", c.failToApply("xrd-valid-updated-invalid.yaml"))
				// An update to immutable XRD fields should be rejected.
				c.step(t, "ImmutableXRDFieldUpdateIsRejected", c.failToApply("xrd-immutable-updated.yaml"))
				// An invalid XRD should be rejected.
				c.step(t, "InvalidXRDIsRejected", c.failToApply("xrd-invalid.yaml"))
			},
		},
		{
			name:      "TestUsageStandalone",
			manifests: "usage/standalone",
			run: func(t *testing.T, c *upstreamRun) {
				c.teardown(t, c.deleteSetup())
				c.step(t, "PrerequisitesAreCreated",
					c.apply("setup/*.yaml"),
					c.createdWithin(30*time.Second, "setup/*.yaml"),
					c.providerReadyWithin(2*time.Minute))
				// Deletion of a (used) resource should be blocked if
				// there is a Usage relation with a using resource defined.
				c.step(t, "UsageBlockedByUsingResource",
					// Create using and used managed resources together with a usage.
					c.apply("with-by/*.yaml"),
					c.createdWithin(30*time.Second, "with-by/*.yaml"),
					c.haveConditionWithin(time.Minute, "with-by/usage.yaml", upstreamAvailable),
					// Deletion of used resource should be blocked by usage.
					c.deletionBlockedByUsageWebhook("with-by/used.yaml"),
					// Deletion of using resource should clear usage.
					c.delete("with-by/using.yaml"),
					c.deletedWithin(30*time.Second, "with-by/using.yaml"),
					c.deletedWithin(30*time.Second, "with-by/usage.yaml"),
					// replayDeletion: the used resource's deletion is
					// replayed after the usage is cleared.
					c.deletedWithin(time.Minute, "with-by/used.yaml"))
				// Deletion of a (protected) resource should be blocked if
				// there is a Usage with a reason defined.
				c.step(t, "UsageBlockedWithReason",
					c.apply("with-reason/*.yaml"),
					c.createdWithin(30*time.Second, "with-reason/*.yaml"),
					c.haveConditionWithin(time.Minute, "with-reason/usage.yaml", upstreamAvailable),
					c.deletionBlockedByUsageWebhook("with-reason/used.yaml"),
					// Deletion of usage should clear usage.
					c.delete("with-reason/usage.yaml"),
					c.deletedWithin(30*time.Second, "with-reason/usage.yaml"),
					// Deletion of protected resource should be allowed after usage is cleared.
					c.delete("with-reason/used.yaml"),
					c.deletedWithin(30*time.Second, "with-reason/used.yaml"))
			},
		},
		{
			name:      "TestUsageComposition",
			manifests: "usage/composition",
			run: func(t *testing.T, c *upstreamRun) {
				used := func(o *unstructured.Unstructured) bool { return o.GetLabels()["usage"] == "used" }
				c.teardown(t, c.deleteSetup())
				c.step(t, "PrerequisitesAreCreated", c.prerequisites(true)...)
				c.step(t, "ClaimCreatedAndReady",
					c.apply("claim.yaml"),
					c.createdWithin(30*time.Second, "claim.yaml"),
					c.haveConditionWithin(5*time.Minute, "claim.yaml", upstreamAvailable))
				c.step(t, "UsedResourceHasInUseLabel",
					c.composedMatchingHaveFieldValueWithin(time.Minute, "claim.yaml", "metadata.labels[crossplane.io/in-use]", "true", used))
				c.step(t, "UsageResourceIsInInitialVersion",
					c.composedMatchingHaveFieldValueWithin(time.Minute, "claim.yaml", "metadata.annotations[crossplane.io/composition-resource-name]", "usage-resource",
						func(o *unstructured.Unstructured) bool { return o.GetLabels()["version"] == "initial" }))
				c.step(t, "UpdateCompositionWithNewUsage", c.apply("composition-updated.yaml"))
				c.step(t, "OldUsageIsGoneNewOneIsComposed",
					c.listedDeletedWithin(2*time.Minute, upstreamUsages, "version=initial"),
					c.composedMatchingHaveFieldValueWithin(time.Minute, "claim.yaml", "metadata.annotations[crossplane.io/composition-resource-name]", "usage-resource-updated",
						func(o *unstructured.Unstructured) bool { return o.GetLabels()["version"] == "updated" }))
				c.step(t, "ClaimDeleted",
					c.delete("claim.yaml"),
					c.deletedWithin(time.Minute, "claim.yaml"))
				// The claim is gone and the garbage collector deletes the
				// composed resources; the using resource's finalizer keeps
				// it, so the used resource's deletion stays blocked.
				c.step(t, "OthersDeletedExceptUsed",
					// The using resource is being deleted by the garbage collector.
					c.listedValidatedWithin(time.Minute, upstreamNops, 1, "usage=using",
						func(o *unstructured.Unstructured) bool { return o.GetDeletionTimestamp() != nil }),
					// The Usage is not: the using resource owns it.
					c.listedValidatedWithin(time.Minute, upstreamUsages, 1, "",
						func(o *unstructured.Unstructured) bool { return o.GetDeletionTimestamp() == nil }),
					// Nor is the used resource: it is still in use.
					c.listedValidatedWithin(time.Minute, upstreamNops, 1, "usage=used",
						func(o *unstructured.Unstructured) bool { return o.GetDeletionTimestamp() == nil }))
				c.step(t, "UsingDeletedAllGone",
					// Remove the finalizer from the using resource.
					c.listedModifiedWith(upstreamNops, 1, "usage=using", func(o *unstructured.Unstructured) { o.SetFinalizers(nil) }),
					// All composed resources, the Usage included, are deleted.
					c.listedDeletedWithin(2*time.Minute, upstreamNops, ""),
					c.listedDeletedWithin(2*time.Minute, upstreamUsages, ""))
			},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			tc.run(t, &upstreamRun{upstreamSuite: s, dir: filepath.Join(root, "manifests", "apiextensions", tc.manifests)})
		})
	}
}

// upstreamSuiteDir returns the test/e2e folder of Crossplane's module at
// crossplaneVersion, downloading it with the go command (from the module
// proxy, into the module cache) if need be. It fails t when the module
// cannot be had and the environment variable CI is set, and skips t
// otherwise (a developer offline).
func upstreamSuiteDir(t *testing.T) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "go", "mod", "download", "-json", crossplaneModule+"@"+crossplaneVersion)
	// Outside any module or workspace: this only fills the module cache.
	cmd.Dir = t.TempDir()
	cmd.Env = append(os.Environ(), "GOWORK=off", "GOFLAGS=", "GOTOOLCHAIN=local")
	out, err := cmd.Output()
	var mod struct {
		Dir   string
		Error string
	}
	if jerr := json.Unmarshal(out, &mod); jerr != nil && err == nil {
		err = jerr
	}
	if err == nil && mod.Error != "" {
		err = errors.New(mod.Error)
	}
	if err == nil && mod.Dir == "" {
		err = errors.New("the go command named no folder")
	}
	if err != nil {
		var stderr string
		if ee := (*exec.ExitError)(nil); errors.As(err, &ee) {
			stderr = string(ee.Stderr)
		}
		msg := fmt.Sprintf("cannot download %s@%s: %v %s%s", crossplaneModule, crossplaneVersion, err, mod.Error, stderr)
		if os.Getenv("CI") != "" {
			t.Fatal(msg)
		}
		t.Skip(msg + " (CI is not set, so this skips instead of failing)")
	}
	dir := filepath.Join(mod.Dir, "test", "e2e")
	if _, err := os.Stat(filepath.Join(dir, "manifests", "apiextensions")); err != nil {
		t.Fatalf("the module %s@%s has no apiextensions manifests: %v", crossplaneModule, crossplaneVersion, err)
	}
	return dir
}

// startUpstreamFunctions builds the test functions standing in for
// upstream's and serves them over mutual TLS, with the client side in
// Secrets of loom-system. It returns the spec of the loom.dev Function of
// each upstream Function name.
func startUpstreamFunctions(t *testing.T, env *framework.Env) map[string]map[string]any {
	t.Helper()
	pki := framework.NewFunctionPKI(t)
	certs := pki.ServerDir(t)
	framework.CreateFunctionSecrets(t, env, stack.Namespace, "upstream-function-ca", "upstream-function-client", pki)
	specs := map[string]map[string]any{}
	for name, dir := range upstreamFunctions {
		specs[name] = map[string]any{
			"endpoint": framework.ServeFunction(t, framework.BuildFunction(t, dir), certs),
			"tls": map[string]any{
				"caSecretRef":     map[string]any{"namespace": stack.Namespace, "name": "upstream-function-ca"},
				"clientSecretRef": map[string]any{"namespace": stack.Namespace, "name": "upstream-function-client"},
			},
		}
	}
	return specs
}

// upstreamSuite is what every case shares.
type upstreamSuite struct {
	env  *framework.Env
	root string
	// functions is the spec of the loom.dev Function standing in for each
	// upstream Function, by name.
	functions map[string]map[string]any
}

// upstreamCondition is a condition as upstream's helpers compare them.
type upstreamCondition struct {
	Type, Status, Reason string
}

// upstreamRun is one case: its manifests folder, and the claim its
// ApplyClaim steps applied last (upstream keeps it in the test's context).
type upstreamRun struct {
	*upstreamSuite
	dir   string
	claim *unstructured.Unstructured
}

// step runs the checks of one of upstream's steps in order and fails t
// (stopping the case) with the first error.
func (c *upstreamRun) step(t *testing.T, name string, checks ...func() error) {
	t.Helper()
	start := time.Now()
	for _, check := range checks {
		if err := check(); err != nil {
			t.Fatalf("step %s: %v", name, err)
		}
	}
	t.Logf("step %s passed after %s", name, time.Since(start).Round(time.Millisecond))
}

// teardown runs steps in order when t ends, whether or not it failed, as
// upstream's teardown steps run. Each step runs even if one before failed,
// so the next case starts clean.
func (c *upstreamRun) teardown(t *testing.T, steps ...func() error) {
	t.Helper()
	t.Cleanup(func() {
		start := time.Now()
		for i, s := range steps {
			if err := s(); err != nil {
				t.Errorf("teardown step %d: %v", i+1, err)
			}
		}
		t.Logf("teardown done after %s", time.Since(start).Round(time.Millisecond))
	})
}

// prerequisites are upstream's PrerequisitesAreCreated: setup/*.yaml
// applied and created, the XRDs watching their composite resources, and, if
// the case installs provider-nop, the provider Healthy and Active (here: its
// NopResource CRD Established).
func (c *upstreamRun) prerequisites(provider bool) []func() error {
	steps := []func() error{
		c.apply("setup/*.yaml"),
		c.createdWithin(30*time.Second, "setup/*.yaml"),
		c.haveConditionWithin(time.Minute, "setup/definition.yaml", upstreamWatchingComposite),
	}
	if provider {
		steps = append(steps, c.providerReadyWithin(2*time.Minute))
	}
	return steps
}

// deleteClaim is upstream's DeleteClaim teardown step.
func (c *upstreamRun) deleteClaim(file string) func() error {
	return func() error {
		return errors.Join(c.delete(file)(), c.deletedWithin(2*time.Minute, file)())
	}
}

// deletePrerequisites is upstream's DeletePrerequisites teardown step
// (ResourcesDeletedAfterListedAreGone of setup/*.yaml after the
// NopResources): it waits for the NopResources composed for the case's
// XRDs to be gone, deletes setup/*.yaml and waits for it to be gone. It
// then also waits for the CRDs of the XRDs to be gone, so that the next
// case, which defines the same kinds, does not meet them terminating.
func (c *upstreamRun) deletePrerequisites() func() error {
	return func() error {
		if err := c.composedGoneWithin(3*time.Minute, "setup/*.yaml")(); err != nil {
			return err
		}
		return errors.Join(c.delete("setup/*.yaml")(), c.deletedWithin(3*time.Minute, "setup/*.yaml")(), c.definitionsGone(time.Minute, "setup/*.yaml")())
	}
}

// fieldRemovalsPropagated are the checks of TestPropagateFieldsRemovalToXR
// that updates and deletes are propagated claim -> XR.
func (c *upstreamRun) fieldRemovalsPropagated() []func() error {
	const d = time.Minute
	return []func() error{
		c.compositeHasFieldValueWithin(d, "claim.yaml", "metadata.labels[foo]", "1"),
		c.compositeHasFieldValueWithin(d, "claim.yaml", "metadata.labels[bar]", upstreamNotFound{}),
		c.compositeHasFieldValueWithin(d, "claim.yaml", "metadata.labels[foo2]", "3"),
		c.compositeHasFieldValueWithin(d, "claim.yaml", "metadata.annotations[test/foo]", "1"),
		c.compositeHasFieldValueWithin(d, "claim.yaml", "metadata.annotations[test/bar]", upstreamNotFound{}),
		c.compositeHasFieldValueWithin(d, "claim.yaml", "metadata.annotations[test/foo2]", "4"),
		c.compositeHasFieldValueWithin(d, "claim.yaml", "spec.numbers[0]", "one"),
		c.compositeHasFieldValueWithin(d, "claim.yaml", "spec.numbers[1]", "five"),
		c.compositeHasFieldValueWithin(d, "claim.yaml", "spec.numbers[2]", upstreamNotFound{}),
		c.compositeHasFieldValueWithin(d, "claim.yaml", "spec.parameters.tags[tag]", "v1"),
		c.compositeHasFieldValueWithin(d, "claim.yaml", "spec.parameters.tags[newtag]", upstreamNotFound{}),
	}
}

// load decodes the manifests of the case's folder that match pattern (in
// the order of their file names, as upstream's decoder reads them) and
// substitutes Loom's parts for Crossplane's package manager.
func (c *upstreamRun) load(pattern string) ([]*unstructured.Unstructured, error) {
	files, err := filepath.Glob(filepath.Join(c.dir, pattern))
	if err != nil {
		return nil, err
	}
	if len(files) == 0 {
		return nil, fmt.Errorf("no manifests match %s", filepath.Join(c.dir, pattern))
	}
	slices.Sort(files)
	var out []*unstructured.Unstructured
	for _, f := range files {
		objs, err := stack.ReadManifests(f)
		if err != nil {
			return nil, err
		}
		for _, o := range objs {
			o, err := c.substitute(o)
			if err != nil {
				return nil, fmt.Errorf("%s: %w", filepath.Base(f), err)
			}
			if o != nil {
				out = append(out, o)
			}
		}
	}
	return out, nil
}

// substitute returns what Loom applies for o: o itself, a loom.dev
// Function for a pkg.crossplane.io Function, or nil for what Loom has no
// use for (Providers, DeploymentRuntimeConfigs).
func (c *upstreamRun) substitute(o *unstructured.Unstructured) (*unstructured.Unstructured, error) {
	if o.GroupVersionKind().Group != "pkg.crossplane.io" {
		return o, nil
	}
	switch o.GetKind() {
	case "Provider", "DeploymentRuntimeConfig":
		return nil, nil
	case "Function":
		spec, ok := c.functions[o.GetName()]
		if !ok {
			return nil, fmt.Errorf("no test function stands in for Function %q", o.GetName())
		}
		f := &unstructured.Unstructured{Object: map[string]any{"spec": spec}}
		f.SetAPIVersion("loom.dev/v1alpha1")
		f.SetKind("Function")
		f.SetName(o.GetName())
		return f, nil
	default:
		return nil, fmt.Errorf("no substitute for %s %q", o.GetKind(), o.GetName())
	}
}

// apply is upstream's ApplyResources: a server-side apply of the manifests,
// forcing conflicts.
func (c *upstreamRun) apply(pattern string) func() error {
	return func() error {
		_, err := c.applyObjects(pattern)
		return err
	}
}

// applyClaim is upstream's ApplyClaim: apply, and remember the claim.
func (c *upstreamRun) applyClaim(file string) func() error {
	return func() error {
		objs, err := c.applyObjects(file)
		if err != nil {
			return err
		}
		if len(objs) != 1 {
			return fmt.Errorf("%s holds %d objects, want one claim", file, len(objs))
		}
		c.claim = objs[0]
		return nil
	}
}

func (c *upstreamRun) applyObjects(pattern string) ([]*unstructured.Unstructured, error) {
	objs, err := c.load(pattern)
	if err != nil {
		return nil, err
	}
	applied := make([]*unstructured.Unstructured, 0, len(objs))
	for _, o := range objs {
		a, err := c.applyOne(o)
		if err != nil {
			return nil, fmt.Errorf("cannot apply %s %q of %s: %w", o.GetKind(), o.GetName(), pattern, err)
		}
		applied = append(applied, a)
	}
	return applied, nil
}

// applyOne server-side-applies o as upstream's ApplyHandler does: upstream's
// field manager, forcing conflicts.
func (c *upstreamRun) applyOne(o *unstructured.Unstructured) (*unstructured.Unstructured, error) {
	ri, err := c.env.Resource(o)
	if err != nil {
		return nil, err
	}
	return ri.Apply(context.Background(), o.GetName(), o, metav1.ApplyOptions{FieldManager: upstreamFieldManager, Force: true})
}

// failToApply is upstream's ResourcesFailToApply: applying the manifests
// must fail.
func (c *upstreamRun) failToApply(pattern string) func() error {
	return func() error {
		objs, err := c.load(pattern)
		if err != nil {
			return err
		}
		for _, o := range objs {
			if _, err := c.applyOne(o); err == nil {
				return fmt.Errorf("%s %q applied successfully, but should have failed", o.GetKind(), o.GetName())
			}
		}
		return nil
	}
}

// delete is upstream's DeleteResources (an object already gone is fine).
func (c *upstreamRun) delete(pattern string) func() error {
	return func() error {
		objs, err := c.load(pattern)
		if err != nil {
			return err
		}
		var errs []error
		for _, o := range objs {
			ri, err := c.env.Resource(o)
			if err == nil {
				err = ri.Delete(context.Background(), o.GetName(), metav1.DeleteOptions{})
			}
			if err != nil && !kerrors.IsNotFound(err) {
				errs = append(errs, fmt.Errorf("cannot delete %s %q: %w", o.GetKind(), o.GetName(), err))
			}
		}
		return errors.Join(errs...)
	}
}

// get returns the live version of o.
func (c *upstreamRun) get(o *unstructured.Unstructured) (*unstructured.Unstructured, error) {
	ri, err := c.env.Resource(o)
	if err != nil {
		return nil, err
	}
	return ri.Get(context.Background(), o.GetName(), metav1.GetOptions{})
}

// eachWithin polls until check passes for every object of pattern, or d
// passes.
func (c *upstreamRun) eachWithin(d time.Duration, pattern string, check func(live *unstructured.Unstructured) error) func() error {
	return func() error {
		objs, err := c.load(pattern)
		if err != nil {
			return err
		}
		return upstreamPoll(d, func() error {
			for _, o := range objs {
				live, err := c.get(o)
				if err != nil {
					return fmt.Errorf("%s %q: %w", o.GetKind(), o.GetName(), err)
				}
				if err := check(live); err != nil {
					return fmt.Errorf("%s %q: %w", o.GetKind(), o.GetName(), err)
				}
			}
			return nil
		})
	}
}

// createdWithin is upstream's ResourcesCreatedWithin.
func (c *upstreamRun) createdWithin(d time.Duration, pattern string) func() error {
	return c.eachWithin(d, pattern, func(*unstructured.Unstructured) error { return nil })
}

// deletedWithin is upstream's ResourcesDeletedWithin.
func (c *upstreamRun) deletedWithin(d time.Duration, pattern string) func() error {
	return func() error {
		objs, err := c.load(pattern)
		if err != nil {
			return err
		}
		return upstreamPoll(d, func() error {
			for _, o := range objs {
				_, err := c.get(o)
				if err == nil {
					return fmt.Errorf("%s %q still exists", o.GetKind(), o.GetName())
				}
				if !kerrors.IsNotFound(err) {
					return err
				}
			}
			return nil
		})
	}
}

// haveConditionWithin is upstream's ResourcesHaveConditionWithin, which
// compares conditions as crossplane-runtime's Condition.Equal does, modulo
// message: type, status, reason and observedGeneration (which the wanted
// conditions leave unset).
func (c *upstreamRun) haveConditionWithin(d time.Duration, pattern string, want ...upstreamCondition) func() error {
	return c.eachWithin(d, pattern, func(live *unstructured.Unstructured) error {
		return upstreamHasConditions(live, want...)
	})
}

// upstreamHasConditions checks that o has the conditions want, compared as
// upstream compares them; a missing condition is Unknown.
func upstreamHasConditions(o *unstructured.Unstructured, want ...upstreamCondition) error {
	conds, _, _ := unstructured.NestedSlice(o.Object, "status", "conditions")
	for _, w := range want {
		got := upstreamCondition{Type: w.Type, Status: "Unknown"}
		var gen any
		for _, c := range conds {
			m, _ := c.(map[string]any)
			if m["type"] != w.Type {
				continue
			}
			got.Status, _ = m["status"].(string)
			got.Reason, _ = m["reason"].(string)
			gen = m["observedGeneration"]
		}
		if got != w {
			return fmt.Errorf("condition %s is %s/%s, want %s/%s", w.Type, got.Status, got.Reason, w.Status, w.Reason)
		}
		if gen != nil && fmt.Sprint(gen) != "0" {
			return fmt.Errorf("condition %s has observedGeneration %v; Crossplane v1.20 leaves it unset", w.Type, gen)
		}
	}
	return nil
}

// hasFieldValue checks that o has want at path (upstreamNotFound: that the
// path does not exist), as upstream's field checks do.
func hasFieldValue(o *unstructured.Unstructured, path string, want any) error {
	got, err := fieldpath.Pave(o.Object).GetValue(path)
	if fieldpath.IsNotFound(err) {
		if _, ok := want.(upstreamNotFound); ok {
			return nil
		}
	}
	if err != nil {
		return fmt.Errorf("field %s: %w", path, err)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		return fmt.Errorf("field %s: -want, +got:\n%s", path, diff)
	}
	return nil
}

// haveFieldValueWithin is upstream's ResourcesHaveFieldValueWithin.
func (c *upstreamRun) haveFieldValueWithin(d time.Duration, pattern, path string, want any) func() error {
	return c.eachWithin(d, pattern, func(live *unstructured.Unstructured) error {
		return hasFieldValue(live, path, want)
	})
}

// compositeOf returns the XR the claim of file references, once it
// references one.
func (c *upstreamRun) compositeOf(file string) (*unstructured.Unstructured, error) {
	objs, err := c.load(file)
	if err != nil {
		return nil, err
	}
	live, err := c.get(objs[0])
	if err != nil {
		return nil, err
	}
	ref, _, _ := unstructured.NestedStringMap(live.Object, "spec", "resourceRef")
	if ref["name"] == "" {
		return nil, fmt.Errorf("claim %q does not have a resourceRef to an XR", live.GetName())
	}
	xr := &unstructured.Unstructured{}
	xr.SetAPIVersion(ref["apiVersion"])
	xr.SetKind(ref["kind"])
	xr.SetName(ref["name"])
	return c.get(xr)
}

// compositeHasFieldValueWithin is upstream's
// CompositeResourceHasFieldValueWithin.
func (c *upstreamRun) compositeHasFieldValueWithin(d time.Duration, claimFile, path string, want any) func() error {
	return func() error {
		return upstreamPoll(d, func() error {
			xr, err := c.compositeOf(claimFile)
			if err != nil {
				return err
			}
			return hasFieldValue(xr, path, want)
		})
	}
}

// composedHaveFieldValueWithin is upstream's
// ComposedResourcesHaveFieldValueWithin, filtered by kind: every composed
// resource of kind gk that the XR of the claim of file references has want
// at path, and there is at least one.
func (c *upstreamRun) composedHaveFieldValueWithin(d time.Duration, file, path string, want any, gk schema.GroupKind) func() error {
	return c.composedMatchingHaveFieldValueWithin(d, file, path, want, func(o *unstructured.Unstructured) bool {
		return o.GroupVersionKind().GroupKind() == gk
	})
}

// composedMatchingHaveFieldValueWithin is upstream's
// ComposedResourcesHaveFieldValueWithin: every composed resource that the
// XR of the claim of file references and that filter accepts (live) has
// want at path, and there is at least one.
func (c *upstreamRun) composedMatchingHaveFieldValueWithin(d time.Duration, file, path string, want any, filter func(*unstructured.Unstructured) bool) func() error {
	return func() error {
		return upstreamPoll(d, func() error {
			xr, err := c.compositeOf(file)
			if err != nil {
				return err
			}
			refs, _, _ := unstructured.NestedSlice(xr.Object, "spec", "resourceRefs")
			checked := 0
			for _, r := range refs {
				m, _ := r.(map[string]any)
				ref := &unstructured.Unstructured{Object: map[string]any{"apiVersion": m["apiVersion"], "kind": m["kind"], "metadata": map[string]any{"name": m["name"]}}}
				if ns, _ := m["namespace"].(string); ns != "" {
					ref.SetNamespace(ns)
				}
				live, err := c.get(ref)
				if err != nil {
					return err
				}
				if !filter(live) {
					continue
				}
				if err := hasFieldValue(live, path, want); err != nil {
					return fmt.Errorf("%s %q: %w", live.GetKind(), live.GetName(), err)
				}
				checked++
			}
			if checked == 0 {
				return errors.New("there were no unfiltered referred managed resources to check")
			}
			return nil
		})
	}
}

// claimUnderTestMustNotChangeWithin is upstream's
// ClaimUnderTestMustNotChangeWithin: the generation of the claim ApplyClaim
// applied last stays the same for d.
func (c *upstreamRun) claimUnderTestMustNotChangeWithin(d time.Duration) func() error {
	return func() error {
		if c.claim == nil {
			return errors.New("no claim applied")
		}
		want := c.claim.GetGeneration()
		return upstreamConsistently(d, func() error {
			live, err := c.get(c.claim)
			if err != nil {
				return err
			}
			if live.GetGeneration() != want {
				return fmt.Errorf("claim %q changed within %s (generation %d, was %d), but it should not have", live.GetName(), d, live.GetGeneration(), want)
			}
			return nil
		})
	}
}

// compositeUnderTestMustNotChangeWithin is upstream's
// CompositeUnderTestMustNotChangeWithin: the resourceVersion of the XR of
// the claim ApplyClaim applied last stays the same for d.
func (c *upstreamRun) compositeUnderTestMustNotChangeWithin(d time.Duration) func() error {
	return func() error {
		if c.claim == nil {
			return errors.New("no claim applied")
		}
		claim, err := c.get(c.claim)
		if err != nil {
			return err
		}
		ref, _, _ := unstructured.NestedStringMap(claim.Object, "spec", "resourceRef")
		xr := &unstructured.Unstructured{}
		xr.SetAPIVersion(ref["apiVersion"])
		xr.SetKind(ref["kind"])
		xr.SetName(ref["name"])
		first, err := c.get(xr)
		if err != nil {
			return fmt.Errorf("cannot get composite: %w", err)
		}
		return upstreamConsistently(d, func() error {
			live, err := c.get(xr)
			if err != nil {
				return err
			}
			if live.GetResourceVersion() != first.GetResourceVersion() {
				return fmt.Errorf("composite resource %q changed within %s, but it should not have:\nbefore: %v\nafter: %v", xr.GetName(), d, first.Object, live.Object)
			}
			return nil
		})
	}
}

// providerReadyWithin stands in for upstream's wait for provider-nop to be
// Healthy and Active: the stack's test provider serves NopResources once
// their CRD is Established.
func (c *upstreamRun) providerReadyWithin(d time.Duration) func() error {
	return func() error {
		crd := &unstructured.Unstructured{}
		crd.SetAPIVersion("apiextensions.k8s.io/v1")
		crd.SetKind("CustomResourceDefinition")
		crd.SetName("nopresources.nop.crossplane.io")
		return upstreamPoll(d, func() error {
			live, err := c.get(crd)
			if err != nil {
				return err
			}
			return upstreamHasConditions(live, upstreamCondition{Type: "Established", Status: "True", Reason: "InitialNamesAccepted"})
		})
	}
}

// xrdGroups returns the API groups of the XRDs among the manifests of
// pattern.
func (c *upstreamRun) xrdGroups(pattern string) ([]string, []string, error) {
	objs, err := c.load(pattern)
	if err != nil {
		return nil, nil, err
	}
	var groups, crds []string
	for _, o := range objs {
		if o.GroupVersionKind().GroupKind() != (schema.GroupKind{Group: "apiextensions.crossplane.io", Kind: "CompositeResourceDefinition"}) {
			continue
		}
		g, _, _ := unstructured.NestedString(o.Object, "spec", "group")
		groups = append(groups, g)
		for _, p := range []string{"names", "claimNames"} {
			if plural, _, _ := unstructured.NestedString(o.Object, "spec", p, "plural"); plural != "" {
				crds = append(crds, plural+"."+g)
			}
		}
	}
	return groups, crds, nil
}

// composedGoneWithin waits for every NopResource that a composite resource
// of the groups the XRDs of pattern define controls to be gone: upstream
// waits for every NopResource, but the cases share the stack with Loom's
// other tests.
func (c *upstreamRun) composedGoneWithin(d time.Duration, pattern string) func() error {
	return func() error {
		groups, _, err := c.xrdGroups(pattern)
		if err != nil {
			return err
		}
		nops := c.env.Dynamic.Resource(schema.GroupVersionResource{Group: "nop.crossplane.io", Version: "v1alpha1", Resource: "nopresources"})
		return upstreamPoll(d, func() error {
			l, err := nops.List(context.Background(), metav1.ListOptions{})
			if err != nil {
				return err
			}
			var left []string
			for _, n := range l.Items {
				owner := metav1.GetControllerOf(&n)
				if owner == nil {
					continue
				}
				if g, _, _ := strings.Cut(owner.APIVersion, "/"); slices.Contains(groups, g) {
					left = append(left, n.GetName())
				}
			}
			if len(left) > 0 {
				return fmt.Errorf("NopResources not deleted yet: %v", left)
			}
			return nil
		})
	}
}

// definitionsGone waits for the CRDs of the XRDs of pattern to be gone.
func (c *upstreamRun) definitionsGone(d time.Duration, pattern string) func() error {
	return func() error {
		_, names, err := c.xrdGroups(pattern)
		if err != nil {
			return err
		}
		crds := c.env.Dynamic.Resource(schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"})
		return upstreamPoll(d, func() error {
			for _, n := range names {
				_, err := crds.Get(context.Background(), n, metav1.GetOptions{})
				if err == nil {
					return fmt.Errorf("CustomResourceDefinition %q still exists", n)
				}
				if !kerrors.IsNotFound(err) {
					return err
				}
			}
			return nil
		})
	}
}

// upstreamPollInterval is upstream's DefaultPollInterval.
const upstreamPollInterval = 500 * time.Millisecond

// upstreamPoll calls f until it returns nil or d passes; the error then
// names f's last failure.
func upstreamPoll(d time.Duration, f func() error) error {
	deadline := time.Now().Add(d)
	tick := time.NewTicker(upstreamPollInterval)
	defer tick.Stop()
	for {
		err := f()
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("not within %s: %w", d, err)
		}
		<-tick.C
	}
}

// upstreamConsistently calls f until d passes and fails on its first
// error.
func upstreamConsistently(d time.Duration, f func() error) error {
	deadline := time.Now().Add(d)
	tick := time.NewTicker(upstreamPollInterval)
	defer tick.Stop()
	for time.Now().Before(deadline) {
		if err := f(); err != nil {
			return err
		}
		<-tick.C
	}
	return nil
}

// The kinds upstream's Usage tests list: Usages as
// apiextensions.crossplane.io/v1alpha1 (usage_test.go's usageList) and
// NopResources (apiextensions_test.go's nopList).
var (
	upstreamUsages = schema.GroupVersionKind{Group: "apiextensions.crossplane.io", Version: "v1alpha1", Kind: "Usage"} //nolint:gochecknoglobals // Treated as a constant.
	upstreamNops   = schema.GroupVersionKind{Group: "nop.crossplane.io", Version: "v1alpha1", Kind: "NopResource"}     //nolint:gochecknoglobals // Treated as a constant.
)

// deleteSetup is the DeletePrerequisites teardown of upstream's Usage
// tests: setup/*.yaml deleted and gone within 3 minutes; then, as
// deletePrerequisites, the CRDs of its XRDs gone too.
func (c *upstreamRun) deleteSetup() func() error {
	return func() error {
		return errors.Join(c.delete("setup/*.yaml")(), c.deletedWithin(3*time.Minute, "setup/*.yaml")(), c.definitionsGone(time.Minute, "setup/*.yaml")())
	}
}

// deletionBlockedByUsageWebhook is upstream's DeletionBlockedByUsageWebhook:
// deleting the objects of pattern fails, with the error of the webhook
// nousages.apiextensions.crossplane.io.
func (c *upstreamRun) deletionBlockedByUsageWebhook(pattern string) func() error {
	return func() error {
		err := c.delete(pattern)()
		if err == nil {
			return errors.New("expected the usage webhook to deny the request but deletion succeeded")
		}
		if !strings.Contains(err.Error(), `admission webhook "nousages.apiextensions.crossplane.io" denied the request`) {
			return fmt.Errorf("expected the usage webhook to deny the request but it failed with err: %w", err)
		}
		return nil
	}
}

// list lists the objects of gvk matching the label selector sel ("" for
// all).
func (c *upstreamRun) list(gvk schema.GroupVersionKind, sel string) ([]unstructured.Unstructured, error) {
	o := &unstructured.Unstructured{}
	o.SetGroupVersionKind(gvk)
	ri, err := c.env.Resource(o)
	if err != nil {
		return nil, err
	}
	l, err := ri.List(context.Background(), metav1.ListOptions{LabelSelector: sel})
	if err != nil {
		return nil, err
	}
	return l.Items, nil
}

// listedDeletedWithin is upstream's ListedResourcesDeletedWithin: the
// objects of gvk matching sel, as listed now, are gone within d.
func (c *upstreamRun) listedDeletedWithin(d time.Duration, gvk schema.GroupVersionKind, sel string) func() error {
	return func() error {
		items, err := c.list(gvk, sel)
		if err != nil {
			return err
		}
		return upstreamPoll(d, func() error {
			for i := range items {
				_, err := c.get(&items[i])
				if err == nil {
					return fmt.Errorf("%s %q still exists", items[i].GetKind(), items[i].GetName())
				}
				if !kerrors.IsNotFound(err) {
					return err
				}
			}
			return nil
		})
	}
}

// listedValidatedWithin is upstream's ListedResourcesValidatedWithin: at
// least n objects of gvk matching sel pass validate within d.
func (c *upstreamRun) listedValidatedWithin(d time.Duration, gvk schema.GroupVersionKind, n int, sel string, validate func(*unstructured.Unstructured) bool) func() error {
	return func() error {
		return upstreamPoll(d, func() error {
			items, err := c.list(gvk, sel)
			if err != nil {
				return err
			}
			found := 0
			for i := range items {
				if validate(&items[i]) {
					found++
				}
			}
			if found < n {
				return fmt.Errorf("%d of %d %s matching %q pass, want at least %d", found, len(items), gvk.Kind, sel, n)
			}
			return nil
		})
	}
}

// listedModifiedWith is upstream's ListedResourcesModifiedWith: every
// object of gvk matching sel is updated with modify, and there are at
// least n.
func (c *upstreamRun) listedModifiedWith(gvk schema.GroupVersionKind, n int, sel string, modify func(*unstructured.Unstructured)) func() error {
	return func() error {
		items, err := c.list(gvk, sel)
		if err != nil {
			return err
		}
		for i := range items {
			o := &items[i]
			modify(o)
			ri, err := c.env.Resource(o)
			if err != nil {
				return err
			}
			if _, err := ri.Update(context.Background(), o, metav1.UpdateOptions{}); err != nil {
				return fmt.Errorf("cannot update %s %q: %w", o.GetKind(), o.GetName(), err)
			}
		}
		if len(items) < n {
			return fmt.Errorf("expected minimum %d resources to be modified, found %d", n, len(items))
		}
		return nil
	}
}
