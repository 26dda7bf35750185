// Marks a CPU row loop that holds Vector API code and must be compiled on its own, never inlined
// into its caller: JitDirectives reads these marks and hands them to the JIT (see there why).
package org.fsdp4j.backend.cpu;

import java.lang.annotation.ElementType;
import java.lang.annotation.Retention;
import java.lang.annotation.RetentionPolicy;
import java.lang.annotation.Target;

@Retention(RetentionPolicy.RUNTIME)
@Target(ElementType.METHOD)
@interface CompiledAlone {
}
